-- Where the control plane delivers each job's output dirs (issue 32 item 7): written by the
-- control plane when it enqueues a job with output dirs, read at ingestion (and by the steps
-- that bring a finished job's files back). A job's `deliver_to` in the queue is never trusted:
-- anyone with queue access can rewrite it; a queued spec that disagrees with these rows is
-- refused.
CREATE TABLE job_deliveries (
    job_id      TEXT NOT NULL,
    dir         TEXT NOT NULL,
    deliver_to  TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (job_id, dir)
);
