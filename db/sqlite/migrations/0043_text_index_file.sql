-- The full-text indexes of dead letters move to a database file of their
-- own beside this one, <file>-search, written by a goroutine of the
-- store on a connection of its own (search.go, issue 37, D7). Here they
-- shared the one writer with every push: merging their segments, a step
-- of which rewrites a word's whole list of dead letters (about 8 MB at a
-- million), held the pushes back for up to a few hundred milliseconds.
--
-- What the indexes must learn is logged here, in the transaction that
-- files or removes the dead letters: a row a dead letter filed
-- (text_index_added) or removed (text_index_removed). The indexer
-- applies the rows, the additions first, in transactions of the search
-- file that record how far it got, so a crash anywhere loses nothing
-- and applies nothing twice; the store deletes the rows applied.
-- search_uid names this database to its search file: a search file of
-- another database, or of an older or newer copy of this one, is built
-- again from the dead letters when the store opens.
CREATE TABLE text_index_added (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    dead_letter_id INTEGER NOT NULL,
    seq            INTEGER NOT NULL
) STRICT;
CREATE TABLE text_index_removed (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    dead_letter_id INTEGER NOT NULL,
    seq            INTEGER NOT NULL
) STRICT;

INSERT INTO settings (key, value) VALUES ('search_uid', lower(hex(randomblob(16))))
    ON CONFLICT (key) DO NOTHING;

-- The search file is built from the dead letters when the store opens.
DROP TABLE dead_letter_errors;
DROP TABLE dead_letter_payloads;
