-- Results the control plane has applied, one row per (job, fencing token): the record that
-- makes effects exactly-once (DESIGN §4 "Exactly-once effects").
CREATE TABLE applied_results (
    job_id          TEXT    NOT NULL,
    fencing_token   INTEGER NOT NULL,
    workflow        TEXT    NOT NULL,
    stage           TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    idempotency_key TEXT,
    outcome_json    TEXT,
    applied_at      TEXT    NOT NULL,
    PRIMARY KEY (job_id, fencing_token)
);
CREATE INDEX applied_results_job ON applied_results (job_id);
