-- The spec each job with output dirs was created with (issue 32 item 7), written once by the
-- control plane right after the enqueue and kept after its result is applied (unlike
-- `submitted_jobs`, the outbox): at ingestion the queued job's spec must agree with it (a job
-- rewritten on the queue is refused), and the family's handler maps payload paths through this
-- spec, never the one read back from the queue.
CREATE TABLE recorded_specs (
    job_id      TEXT PRIMARY KEY,
    spec_json   TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
