-- skillforge queue schema, version 4: live output of running jobs (`skillforge jobs logs`).
-- One row per chunk a worker sent, in order of `id`; `fencing_token` is the attempt's lease.
-- A running job keeps at most OUTPUT_CAP_CHUNKS rows, trimmed to OUTPUT_TAIL_CHUNKS when it
-- ends (crates/engine/src/output.rs). No foreign key: retention (sqlite/retention.rs) deletes a
-- pruned job's rows with it (they are keyed by its id).
CREATE TABLE job_output (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    fencing_token INTEGER NOT NULL,
    stream TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    data BLOB NOT NULL
);
CREATE INDEX job_output_by_job ON job_output (job_id, id);
