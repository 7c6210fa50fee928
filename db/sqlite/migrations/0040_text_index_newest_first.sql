-- The full-text indexes of dead letters (migration 0015) keep their
-- lists of documents newest first (FTS4's order=DESC), so that a search
-- reads a word's list from the newest dead letter down and stops where
-- it has what it needs (issue 37).
--
-- FTS4 reads a list incrementally, and stops early, only in the order
-- it is kept in. Kept oldest first, as before, every search for a word
-- that every payload holds read that word's whole list, a million
-- entries at a million dead letters, in each of its statements (the
-- count that finds the word common, the page of a window of the newest
-- dead letters, its total): 246 ms of CPU a page. Newest first, the
-- count stops at its cap and a window's statements read the list from
-- the newest entry to the window's bottom: a page costs the same at any
-- size. Every query of the indexes asks for the newest first (ORDER BY
-- docid DESC) or for none in particular.
--
-- The indexes are made again from their texts: the error texts from
-- dead_letters (every dead letter is indexed: its row goes only after
-- its words), the payloads' words from the old index's own copy of them.
-- At a million dead letters this takes about a minute, once.
DROP TABLE dead_letter_errors;
CREATE VIRTUAL TABLE dead_letter_errors USING fts4(content="dead_letters", error, tokenize=unicode61 "tokenchars=_-", order=DESC);
INSERT INTO dead_letter_errors (dead_letter_errors) VALUES ('rebuild');

CREATE VIRTUAL TABLE dead_letter_payloads_desc USING fts4(text, tokenize=unicode61 "tokenchars=_-", order=DESC);
INSERT INTO dead_letter_payloads_desc (docid, text) SELECT docid, text FROM dead_letter_payloads;
DROP TABLE dead_letter_payloads;
ALTER TABLE dead_letter_payloads_desc RENAME TO dead_letter_payloads;

INSERT INTO dead_letter_errors (dead_letter_errors) VALUES ('automerge=8');
INSERT INTO dead_letter_payloads (dead_letter_payloads) VALUES ('automerge=8');
