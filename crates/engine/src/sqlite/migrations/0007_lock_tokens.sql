-- skillforge queue schema, version 7: `locks` holds only held locks; fencing tokens come from
-- one counter (issue 19 item 4: `locks` stays O(held)).
--
-- Before, a released or reaped lock kept its row (held = 0) so that its name's next token was
-- higher than the last; each worker process left a `worker:<id>` presence row forever. Now a
-- release or reap deletes the row, and every acquisition takes the next value of the single
-- `lock_tokens` counter, so a name's tokens still strictly increase (as on Redis, which takes
-- them from one counter too). The counter starts past every token handed out so far.
CREATE TABLE lock_tokens (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    -- The last fencing token handed out to any lock.
    last INTEGER NOT NULL
);
INSERT INTO lock_tokens (id, last) SELECT 1, coalesce(MAX(fencing_token), 0) FROM locks;
DELETE FROM locks WHERE held = 0;
DROP INDEX locks_held;
ALTER TABLE locks DROP COLUMN held;
