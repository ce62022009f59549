-- skillforge queue schema, version 8: quarantined job records (issue 32 item 2), as on Redis.
--
-- A job row whose spec or outcome cannot be decoded (a hand edit, a file written by a build with
-- another format) made every read that met it fail: one bad pending result stopped ingestion and
-- `jobs list`. Ingestion now quarantines such a result: its row gets `result_pending = 2` (neither
-- pending, 1, nor acknowledged and prunable, 0) and a row here says why and when; `jobs list
-- --state broken` lists these, `jobs purge ID` deletes one with everything of its job.
CREATE TABLE broken_jobs (
    -- The job's id, as `jobs.id`.
    id                BLOB    PRIMARY KEY,
    reason            TEXT    NOT NULL,
    quarantined_at_ms INTEGER NOT NULL
);
