package sqlcore

import (
	"context"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Space reads the page size, the page and free page counts and whether
// free pages can be given back.
//
// On SQLite: from the database header as the transaction sees it
// (auto_vacuum=INCREMENTAL gives pages back). Reads no table.
//
// On PostgreSQL: the page is the server's block; Pages is the size of
// Lazarus's tables with their indexes and TOAST (postgres.spaceSQL), rounded up
// to blocks, as the server's files have it now (not the snapshot's).
// FreePages is 0: PostgreSQL keeps the room of deleted rows inside each
// table's files, where (auto)vacuum makes it reusable, and tells how
// much only through an extension (pg_freespacemap, pgstattuple) that
// Lazarus does not ask for. Reclaims is false: giving that room back to
// the file system rewrites a table under an exclusive lock (VACUUM
// FULL, or pg_repack beside it), which is the database administrator's
// to run, not the store's.
//
// Never broker.ErrNotFound on either store.
func (t *Tx) Space(ctx context.Context) (broker.Space, error) {
	return t.d.Space(ctx, t)
}

// GiveBackPages runs PRAGMA incremental_vacuum for up to pages free pages
// in the transaction (the file is cut at its commit) and returns how
// many the freelist lost. It writes the pages it moves from the end of
// the file, their parents and the pointer map; on a database without
// auto_vacuum=INCREMENTAL it does nothing and returns 0. On PostgreSQL
// it does nothing and returns 0: the store gives nothing back (Space).
func (t *Tx) GiveBackPages(ctx context.Context, pages int) (int64, error) {
	if pages <= 0 {
		return 0, nil
	}
	return t.d.GiveBackPages(ctx, t, pages)
}
