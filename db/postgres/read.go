package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Reads (View) run on a pool of their own, so that however many of them
// run at once, and however long, they never hold the connections the
// writes need (a push waits for none of them): the write pool serves the
// writes (one at a time in a process, wmu), the notifier, the lead and
// the member count; the read pool every snapshot. Each statement of a
// read stops after readTimeout (statement_timeout, unless the URL sets
// one), answered broker.ErrTooSlow: one costly list (a filter that the
// indexes cannot narrow) cannot take the server's cores for long.

// readTimeout bounds one statement of a read.
const readTimeout = 15 * time.Second

// readPool opens the read pool: the write pool's settings (cfg, a copy
// of which it takes), the same number of connections at most, and
// statement_timeout.
func readPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, *sql.DB, error) {
	rc := cfg.Copy()
	if _, set := rc.ConnConfig.RuntimeParams["statement_timeout"]; !set {
		rc.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(readTimeout.Milliseconds())
	}
	rc.ConnConfig.RuntimeParams["application_name"] = "lazarus-read"
	pool, err := pgxpool.NewWithConfig(ctx, rc)
	if err != nil {
		return nil, nil, err
	}
	return pool, stdlib.OpenDBFromPool(pool), nil
}

// readError is err of a read, with a statement that statement_timeout
// stopped made broker.ErrTooSlow.
func readError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "57014" {
		return fmt.Errorf("%w: %w", broker.ErrTooSlow, err)
	}
	return unavailable(err)
}
