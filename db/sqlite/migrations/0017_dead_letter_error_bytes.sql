-- An ack's error text is kept up to broker.MaxErrorText bytes; what was
-- cut is lost, but its size is kept so that the page can say so ("cut at
-- 8 KiB of 23 KiB"): error_bytes is the text's size in bytes as the
-- worker sent it when it was cut, 0 when it was kept whole (and for the
-- dead letters filed before this migration, whose size was not kept).
ALTER TABLE dead_letters ADD COLUMN error_bytes INTEGER NOT NULL DEFAULT 0;
