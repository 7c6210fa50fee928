package db

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// A libpq key=value string is a PostgreSQL database, as pgx reads it,
// never a SQLite file of that name.
func TestAKeyValueStringOpensPostgreSQL(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.Database(t, "db", Prepare))
	if err != nil {
		t.Fatal(err)
	}
	kv := "dbname=" + strings.TrimPrefix(u.Path, "/") + " user=" + u.User.Username()
	if h := u.Query().Get("host"); h != "" {
		kv = "host=" + h + " " + kv
	} else {
		kv = "host=" + u.Hostname() + " port=" + u.Port() + " " + kv
		if pw, ok := u.User.Password(); ok {
			kv += " password='" + pw + "'"
		}
	}
	if !IsPostgres(kv) {
		t.Fatalf("IsPostgres(%q) = false", kv)
	}
	d, err := Open(context.Background(), kv, SyncNormal)
	if err != nil {
		t.Fatalf("open %s: %v", kv, err)
	}
	t.Cleanup(func() { d.Close() })
	if !d.Postgres() {
		t.Fatal("opened as SQLite")
	}
	if _, err := os.Stat(kv); !errors.Is(err, fs.ErrNotExist) {
		os.Remove(kv)
		t.Fatalf("a file named %q was made", kv)
	}
}

// A string that looks like key=value but starts with no connection
// keyword is refused, not made a SQLite file; a path is still a path.
func TestAMistypedKeyValueStringIsRefused(t *testing.T) {
	t.Parallel()
	const bad = "dbnam=lazarus user=lz password=s3cret"
	_, err := Open(context.Background(), bad, SyncNormal)
	if _, serr := os.Stat(bad); !errors.Is(serr, fs.ErrNotExist) {
		for _, f := range []string{bad, bad + "-wal", bad + "-shm", bad + ".lock"} {
			os.Remove(f)
		}
		t.Fatalf("a file named %q was made", bad)
	}
	if err == nil || !strings.Contains(err.Error(), `"dbnam"`) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("open %q: %v; want a refusal naming dbnam, without the password", bad, err)
	}
	for _, path := range []string{"./a=b.db", "/var/lib/lazarus/lazarus.db", "lazarus.db"} {
		if IsPostgres(path) || CheckName(path) != nil {
			t.Errorf("%q is not taken as a file: IsPostgres %v, CheckName %v", path, IsPostgres(path), CheckName(path))
		}
	}
}

// A URL whose password holds @ or / (not percent-encoded) fails with an
// error that says to percent-encode it, and shows no part of it.
func TestAURLWithAnUnencodedPasswordSaysToPercentEncodeIt(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://lz:se/cr3t@127.0.0.1:1/lazarus",
		"postgres://lz:se@cr3t@127.0.0.1:1/lazarus",
		"postgresql://lz:s%zzcr3t@127.0.0.1:1/lazarus",
	} {
		_, err := Open(context.Background(), dsn, SyncNormal)
		if err == nil || !strings.Contains(err.Error(), "percent-encoded") || strings.Contains(err.Error(), "cr3t") {
			t.Errorf("open %s: %v; want an error saying to percent-encode the password, without it", dsn, err)
		}
	}
}
