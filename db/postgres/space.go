package postgres

import (
	"context"
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// spaceSQL reads, on PostgreSQL, the block size and the bytes of the
// tables in Lazarus's schema (the first of the search path, where the
// migrations made them), with their indexes and TOAST: pg_class and each
// relation's files, no row of a table. The database may hold other
// schemas, which are not Lazarus's to count.
const spaceSQL = `SELECT current_setting('block_size')::bigint,
	COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = current_schema() AND c.relkind = 'r'`

// Space is Space on PostgreSQL.
func (dialect) Space(ctx context.Context, t *sqlcore.Tx) (broker.Space, error) {
	var s broker.Space
	var bytes int64
	if err := t.QueryRow(ctx, spaceSQL).Scan(&s.PageSize, &bytes); err != nil {
		return broker.Space{}, fmt.Errorf("space: %w", err)
	}
	s.Pages = (bytes + s.PageSize - 1) / s.PageSize
	return s, nil
}

// GiveBackPages gives nothing back on PostgreSQL (Space).
func (dialect) GiveBackPages(context.Context, *sqlcore.Tx, int) (int64, error) { return 0, nil }
