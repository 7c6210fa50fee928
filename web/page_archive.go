package web

import (
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// archiveRow says, in the queue page's deadLetterArchive row, what the
// archive does for q: failing since when and why, how many it wrote
// since the start, or why it writes nothing (no retention, no
// --archive-dir).
func archiveRow(b *broker.Broker, q broker.QueueSummary, rows []views.Option) []views.Option {
	o := q.Options
	if !o.DeadLetterArchive {
		return rows
	}
	st, _ := b.ArchiveStatusOf(q.Name)
	var say string
	switch {
	case !st.FailingSince.IsZero():
		say = fmt.Sprintf("archive failing since %s: %s; the dead letters due are kept, not expired, and tried again at each maintenance run (%d failed writes)",
			st.FailingSince.UTC().Format(timeFormat), st.Err, st.Failures)
	case o.DeadLetterRetentionSeconds <= 0:
		say = "nothing is archived: dead letters do not expire (deadLetterRetentionSeconds is 0)"
	case !b.Archives():
		say = "no archive directory is configured (--archive-dir): the dead letters due are kept, not expired"
	default:
		say = fmt.Sprintf("dead letters are written to the archive before they expire; %d written since the start", st.Written)
	}
	for i := range rows {
		if rows[i].Name == "deadLetterArchive" {
			rows[i].Value += " (" + say + ")"
		}
	}
	return rows
}
