-- An event that is sent again when what it says changes (issue 37 item 11:
-- `candidate.awaiting_promotion` again when the guardrail that blocks the candidate changes):
-- `change_key` is '' for an event sent once per (event, job_id), and `<n>:<what>` for the n-th
-- change of such an event. SQLite cannot change a primary key in place, so the table is rebuilt.
CREATE TABLE promotion_events_new (
    event       TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    root_id     TEXT NOT NULL,
    detail_json TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    change_key  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (event, job_id, change_key)
);
INSERT INTO promotion_events_new (event, job_id, root_id, detail_json, created_at)
    SELECT event, job_id, root_id, detail_json, created_at FROM promotion_events ORDER BY rowid;
DROP TABLE promotion_events;
ALTER TABLE promotion_events_new RENAME TO promotion_events;

-- The counts a canary's window decision was made on (issue 37 item 11), kept from the check that
-- submitted the decision until its event is sent, by whichever process sends it.
CREATE TABLE canary_window_evidence (
    version_id  TEXT NOT NULL,
    stage       TEXT NOT NULL,
    detail_json TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (version_id, stage)
);
