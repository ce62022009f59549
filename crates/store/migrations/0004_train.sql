-- Train sessions and their iterations (seed SkillOpt "Complete train-mode path"; facts §3, §8
-- table and column names). States use the facts' vocabulary: the linear states
-- request_confirmed … candidate_review_published and the terminal states
-- optimizer_completed_no_candidate, candidate_promoted, candidate_rejected, run_abandoned.
-- Transitions are checked by skillforge_workflows::train::state before a row changes; the store
-- only compares-and-sets. metadata_json is '' or a JSON object; all times RFC 3339 TEXT.

CREATE TABLE skillopt_train_sessions (
    id                  TEXT PRIMARY KEY,
    template_id         TEXT NOT NULL,
    template_version_id TEXT NOT NULL,
    target_repo         TEXT NOT NULL DEFAULT '',
    workspace_repo      TEXT NOT NULL DEFAULT '',
    preview_repo        TEXT NOT NULL DEFAULT '',
    request_summary     TEXT NOT NULL DEFAULT '',
    task_kind           TEXT NOT NULL DEFAULT 'custom',
    state               TEXT NOT NULL DEFAULT 'request_confirmed',
    metadata_json       TEXT NOT NULL DEFAULT '',
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);

CREATE TABLE skillopt_train_iterations (
    id                       TEXT PRIMARY KEY,
    session_id               TEXT NOT NULL REFERENCES skillopt_train_sessions (id) ON DELETE CASCADE,
    eval_run_id              TEXT NOT NULL DEFAULT '',
    base_template_version_id TEXT NOT NULL DEFAULT '',
    candidate_version_id     TEXT NOT NULL DEFAULT '',
    mode                     TEXT NOT NULL DEFAULT 'explore',
    exploration_level        TEXT NOT NULL DEFAULT 'high',
    state                    TEXT NOT NULL DEFAULT 'request_confirmed',
    issue_repo               TEXT NOT NULL DEFAULT '',
    issue_number             INTEGER NOT NULL DEFAULT 0,
    issue_url                TEXT NOT NULL DEFAULT '',
    pull_request_repo        TEXT NOT NULL DEFAULT '',
    pull_request_number      INTEGER NOT NULL DEFAULT 0,
    pull_request_url         TEXT NOT NULL DEFAULT '',
    decision_reason          TEXT NOT NULL DEFAULT '',
    metadata_json            TEXT NOT NULL DEFAULT '',
    created_at               TEXT NOT NULL,
    updated_at               TEXT NOT NULL,
    UNIQUE (session_id, id)
);
CREATE INDEX idx_train_iterations_session ON skillopt_train_iterations (session_id, created_at);
