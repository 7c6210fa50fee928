package sqlite

import (
	"context"
	"time"
)

// catchUpFrames is the log's length at which the writer, between two
// transactions, copies back what the background checkpoint could not.
//
// Why: SQLite starts the log over only when a write begins with all of
// it copied back, and a background checkpoint, running beside a writer
// that commits every few tens of microseconds, never ends with all of it
// copied: each finds new frames behind it. Under steady writes the log
// grew to 25,000 frames (100 MB) and stayed long; SQLite places each new
// frame, and finds each page's newest, by walking a hash chain as long as
// that page's frames in the log (a fifth of a pop+ack's instructions).
// The writer's own checkpoint, when the background one has done the bulk
// of the copying, copies only what came since and cannot be overtaken:
// the next write starts the log over.
const catchUpFrames = 2 * checkpointFrames

// catchUpResidual is the most frames a catch-up copies and syncs beyond
// what the background checkpoint did.
const catchUpResidual = 256

// catchUp checkpoints on the writer's connection, outside any
// transaction, in the writer goroutine between two groups (never in a
// caller's Update: the caller whose commit made it due has its answer):
// the writes queued meanwhile wait for the copy of the last frames and its
// two fsyncs. When a reader holds part of the log (the checkpoint could
// not copy it all), the next try waits until the log has grown by
// checkpointFrames more, or started over: a reader that stays would
// otherwise make every commit try again in vain.
func (d *Store) catchUp() {
	d.catchUps++
	if d.catchUpHook != nil {
		d.catchUpHook()
	}
	var busy, log, copied int
	err := d.main.raw.queryRowScan("PRAGMA main.wal_checkpoint(PASSIVE)", &busy, &log, &copied)
	if err != nil && !isBusy(err) {
		d.log.Warn("checkpoint", "err", err)
	}
	if err != nil || busy != 0 || copied < log {
		d.catchUpFrom = max(log, d.walLast) + checkpointFrames
	}
}

// walSafetyPages is the log size at which the writer checkpoints at
// commit (as SQLite does by default at 1000) when the background
// checkpointer has fallen behind.
const walSafetyPages = 8000

// checkpointEvery spaces the background checkpoints: each copies what the
// writes since the last one added to the log...
const checkpointEvery = 50 * time.Millisecond

// ...unless the log has grown by checkpointFrames since: then the next
// one starts at once. A log kept short is cheaper to write (SQLite finds
// each page's newest frame, and places each new one, by walking a hash
// chain as long as that page's frames in the log: 5 % of a pop+ack's CPU
// at 50 ms) and each checkpoint's copy and fsync stay small, which is
// what a producer beside a bulk job or a retention sweep waits for.
const checkpointFrames = 1000

// kickByFrames, after a commit that left the log n frames long, starts
// the next background checkpoint at once when the log has grown by
// checkpointFrames since it last did, and asks for the writer's catch-up
// past catchUpFrames (unless the background checkpoint is running, or a
// reader held the log at the last try and it has not grown enough since).
func (d *Store) kickByFrames(n int) {
	if n < d.walLast { // a checkpoint copied it all and the log started over
		d.walKicked, d.catchUpFrom = 0, 0
		d.bgSynced.Store(0)
	}
	d.walLast = n
	// With a background checkpointer, only the few frames written since
	// its last run are left to the writer: its two fsyncs then sync little
	// (at NORMAL the log is synced at checkpoints only, and syncing a bulk
	// job's 7,000 frames on the writer's path held a producer's push for
	// 40 ms); a bulk job's log waits for the job to end.
	small := d.ckptDone == nil || int64(n)-d.bgSynced.Load() <= catchUpResidual
	if n >= catchUpFrames && n >= d.catchUpFrom && small && !d.checkpointing.Load() {
		d.catchUpDue.Store(true)
	}
	if n-d.walKicked < checkpointFrames {
		return
	}
	d.walKicked = n
	select {
	case d.ckptNow <- struct{}{}:
	default:
	}
}

// checkpointer copies the write-ahead log back into the database after
// writes, on the write pool's other connection, concurrently with the
// writer (a PASSIVE checkpoint never blocks it): the fsync and the copy
// stay off every write's path. Once all of the log is copied and no
// reader needs it, the next write starts the log over.
func (d *Store) checkpointer() {
	defer close(d.ckptDone)
	ckpt := d.ckpt
	if d.ckptEvery < 0 {
		ckpt = nil // by the log's growth only (ckptNow)
	}
	for {
		select {
		case <-ckpt:
		case <-d.ckptNow:
		case <-d.stop:
			return
		}
		d.checkpointing.Store(true)
		var busy, log, copied int
		err := d.write.QueryRowContext(context.Background(), "PRAGMA main.wal_checkpoint(PASSIVE)").Scan(&busy, &log, &copied)
		if err == nil && busy == 0 {
			d.bgSynced.Store(int64(log)) // a checkpoint syncs the log before it copies
		}
		d.checkpointing.Store(false)
		if err != nil && !isBusy(err) {
			d.log.Warn("checkpoint", "err", err)
		}
		if ckpt == nil {
			continue
		}
		select {
		case <-time.After(d.ckptEvery):
		case <-d.ckptNow:
		case <-d.stop:
			return
		}
	}
}
