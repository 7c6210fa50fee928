-- Free-text search of dead letters (issue 14): full-text indexes of their
-- error texts and of their messages' payloads, kept in the transactions
-- that file and remove dead letters (db/tx_text.go).
--
-- FTS4, not FTS5: go-sqlite3 compiles FTS4 in by default, FTS5 only with
-- the sqlite_fts5 build tag, which every build, test, the e2e binary,
-- bench/ and a user's `go install` would then need (and a build without
-- it would fail at this migration). FTS4 has what the search needs:
-- unicode61 words (case and diacritics folded), phrases, docid order.
-- "_" and "-" are letters here: ord_123, o-5, a UUID, payments-api and
-- insufficient_funds are one word each, so that an id is one rare word
-- (as a phrase of "ord" and "123" it would read the list of every
-- payload holding "ord", at 1M dead letters the whole index); a search
-- for "payments" then does not find "payments-api".
--
-- dead_letter_errors indexes dead_letters.error, read from dead_letters
-- itself (external content: nothing is stored twice); its docid is the
-- dead letter's id. Its rows are removed before their dead letters (FTS4
-- reads the text to remove its words).
CREATE VIRTUAL TABLE dead_letter_errors USING fts4(content="dead_letters", error, tokenize=unicode61 "tokenchars=_-");
INSERT INTO dead_letter_errors (dead_letter_errors) VALUES ('rebuild');

-- dead_letter_payloads indexes, once per message with at least one dead
-- letter (docid = the message's seq; a message dead in two groups is
-- indexed once), the words of its payload: every object key and every
-- string and number value, decoded (a payload's "caf\u00e9" is the word
-- café, and a Go encoder's "\u0026" is no word). The text is stored (the
-- payload is not it), so it costs about the payload's size again; the row
-- goes when the message's last dead letter goes (replay, delete, queue
-- deletion): it is bounded by the dead letters.
CREATE VIRTUAL TABLE dead_letter_payloads USING fts4(text, tokenize=unicode61 "tokenchars=_-");
INSERT INTO dead_letter_payloads (docid, text)
    SELECT m.seq, (SELECT COALESCE(group_concat(
            CASE WHEN typeof(j.key) = 'text' THEN j.key ELSE '' END || ' ' ||
            CASE WHEN j.type IN ('text', 'integer', 'real') THEN j.atom ELSE '' END, ' '), '')
        FROM json_tree(m.payload) j)
    FROM messages m WHERE m.seq IN (SELECT seq FROM dead_letters);

-- Merge the indexes' segments a little after each write rather than all
-- at once in one unlucky commit (FTS4 keeps the setting).
INSERT INTO dead_letter_errors (dead_letter_errors) VALUES ('automerge=8');
INSERT INTO dead_letter_payloads (dead_letter_payloads) VALUES ('automerge=8');
