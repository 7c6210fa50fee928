package main

import (
	"strings"
	"sync"
	"sync/atomic"
)

// recorder counts the SQL statements that connections opened while it is
// active run, by phase. The statements are seen through SQLite's trace
// hook (trace.go), so they are exactly those the broker and db run.
type recorder struct {
	mu    sync.Mutex
	phase string
	// stmts[phase] counts each statement text; order keeps first sightings.
	stmts map[string]map[string]int
	order map[string][]string
}

// activeRecorder is the recorder that connections opened now report to.
var activeRecorder atomic.Pointer[recorder]

// startRecorder makes a recorder active: connections opened from now on
// report their statements to it. It is nil when the trace hook is not
// built in.
func startRecorder() *recorder {
	if !traceAvailable {
		return nil
	}
	r := &recorder{stmts: map[string]map[string]int{}, order: map[string][]string{}}
	activeRecorder.Store(r)
	return r
}

// stop makes no recorder active; connections opened before keep reporting
// to r, which ignores them outside a phase.
func (r *recorder) stop() {
	if r == nil {
		return
	}
	activeRecorder.CompareAndSwap(r, nil)
	r.setPhase("")
}

// setPhase names what runs next; statements outside a phase are not kept.
func (r *recorder) setPhase(p string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase = p
}

// record counts one statement of the current phase.
func (r *recorder) record(sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.phase == "" {
		return
	}
	sql = strings.TrimSpace(sql)
	if sql == "" || strings.HasPrefix(sql, "--") { // a trigger's body
		return
	}
	m := r.stmts[r.phase]
	if m == nil {
		m = map[string]int{}
		r.stmts[r.phase] = m
	}
	if m[sql] == 0 {
		r.order[r.phase] = append(r.order[r.phase], sql)
	}
	m[sql]++
}

// phaseCounts are the statements of one phase.
type phaseCounts struct {
	statements   int // everything but BEGIN, COMMIT and ROLLBACK
	transactions int // COMMITs
	distinct     []string
}

func (r *recorder) counts(phase string) phaseCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c phaseCounts
	for _, sql := range r.order[phase] {
		n := r.stmts[phase][sql]
		switch u := strings.ToUpper(sql); {
		case strings.HasPrefix(u, "COMMIT") || strings.HasPrefix(u, "END"):
			c.transactions += n
		case strings.HasPrefix(u, "BEGIN") || strings.HasPrefix(u, "ROLLBACK"):
		default:
			c.statements += n
			c.distinct = append(c.distinct, sql)
		}
	}
	return c
}
