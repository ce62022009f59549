-- Automatic trace harvesting, Mode A (seed "Automatic trace-harvested feedback (Mode A, off by
-- default)" and its three legs). The harvested feedback itself lives in eval_runs,
-- eval_review_items and feedback_events (0003); these tables hold only what the control plane
-- needs to attribute an outcome, remember CI observations, and route leg results. All times are
-- RFC 3339 TEXT.

-- Which template version produced the change behind a pull request (S-16: only attributed
-- implement-family changes are harvested). One row per (repo, pr); re-attribution overwrites.
CREATE TABLE harvest_attributions (
    repo                TEXT NOT NULL,            -- owner/repo
    pr                  INTEGER NOT NULL CHECK (pr > 0),
    template_id         TEXT NOT NULL,
    template_version_id TEXT NOT NULL,            -- <id>@v<N>
    resolved_commit     TEXT NOT NULL,            -- the implement job's template_resolved_commit
    kind                TEXT NOT NULL DEFAULT 'implement',
    implementer_runtime TEXT NOT NULL DEFAULT '', -- agent runtime that implemented it ('' = unknown)
    checkout            TEXT NOT NULL DEFAULT '', -- path of a clone workers can see ('' = none: no legs)
    base                TEXT NOT NULL DEFAULT '', -- base revision of the change ('' = head^)
    title               TEXT NOT NULL DEFAULT '',
    instructions        TEXT NOT NULL DEFAULT '', -- the implement job's ask (the review leg's scope)
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    PRIMARY KEY (repo, pr)
);

-- Commit statuses / check suites seen at a SHA (from webhooks or `harvest outcome --ci`).
-- context: the status context or check-suite app slug; state: success|failure|error|pending|neutral|….
CREATE TABLE harvest_ci_observations (
    repo        TEXT NOT NULL,
    sha         TEXT NOT NULL,
    context     TEXT NOT NULL,
    state       TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    observed_at TEXT NOT NULL,
    PRIMARY KEY (repo, sha, context)
);

-- Review rounds that requested changes, one row per review id (webhook) so a redelivery counts once.
CREATE TABLE harvest_review_rounds (
    repo        TEXT NOT NULL,
    pr          INTEGER NOT NULL,
    review_id   TEXT NOT NULL,
    observed_at TEXT NOT NULL,
    PRIMARY KEY (repo, pr, review_id)
);

-- A leg job the control plane dispatches, keyed by the job's idempotency key and recorded before
-- the job is enqueued: ingestion finds the harvest context of a finished job here and writes that
-- leg's row. job_id is filled in once the queue has assigned it.
CREATE TABLE harvest_leg_jobs (
    dispatch_key        TEXT PRIMARY KEY,
    job_id              TEXT NOT NULL DEFAULT '',
    leg                 TEXT NOT NULL CHECK (leg IN ('hard_verifier', 'checkers', 'review')),
    repo                TEXT NOT NULL,
    pr                  INTEGER NOT NULL,
    template_id         TEXT NOT NULL,
    template_version_id TEXT NOT NULL,
    head                TEXT NOT NULL,
    context_json        TEXT NOT NULL DEFAULT '{}',
    created_at          TEXT NOT NULL
);
CREATE INDEX idx_harvest_leg_jobs_pr ON harvest_leg_jobs (repo, pr);

-- Job events of the harvester (auto_trace_harvest_failed, hard_verifiers_failed,
-- deterministic_checkers_failed, cross_family_review_failed,
-- cross_family_review_samefamily_fallback, …): what the seed records instead of failing a job.
CREATE TABLE harvest_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     TEXT NOT NULL DEFAULT '',
    repo       TEXT NOT NULL DEFAULT '',
    pr         INTEGER NOT NULL DEFAULT 0,
    event      TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
CREATE INDEX idx_harvest_events_pr ON harvest_events (repo, pr);
