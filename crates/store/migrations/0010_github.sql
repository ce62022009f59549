-- GitHub as a forge (issue 16; seed "GitHub Feedback Collector", "Complete train-mode path" steps
-- 3–4 and 8, Mode A's PR watcher; facts §3 review watches, §8 skillopt_review_watches). All times
-- are RFC 3339 TEXT.

-- A published review issue the control plane watches for reviewer comments (facts §8; one row per
-- issue). expected_item_ids_json: the items a review must answer; stale_after: when a reminder is
-- due if feedback is still missing (published + stale_threshold_seconds, default 86400 = 24 h);
-- stale_notified: 1 once the reminder was posted.
CREATE TABLE skillopt_review_watches (
    repo                    TEXT NOT NULL,               -- owner/repo
    issue_number            INTEGER NOT NULL CHECK (issue_number > 0),
    run_id                  TEXT NOT NULL,
    expected_item_ids_json  TEXT NOT NULL DEFAULT '[]',
    status                  TEXT NOT NULL DEFAULT 'watching' CHECK (status IN ('watching', 'synced', 'closed')),
    last_seen_comment_id    INTEGER NOT NULL DEFAULT 0,
    last_import_error_hash  TEXT NOT NULL DEFAULT '',
    stale_after             TEXT NOT NULL,
    stale_threshold_seconds INTEGER NOT NULL DEFAULT 86400 CHECK (stale_threshold_seconds > 0),
    stale_notified          INTEGER NOT NULL DEFAULT 0 CHECK (stale_notified IN (0, 1)),
    metadata_json           TEXT NOT NULL DEFAULT '{}',
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (repo, issue_number)
);
CREATE INDEX idx_review_watches_run ON skillopt_review_watches (run_id);

-- The pull-request watcher of `skillforge serve` (ETag-conditional polls): the ETag of the last
-- list answer per repository, and per PR the `updated_at` last harvested, so a re-poll of an
-- unchanged PR costs no further requests.
CREATE TABLE github_watch_etags (
    repo       TEXT NOT NULL,
    resource   TEXT NOT NULL,                            -- e.g. 'pulls'
    etag       TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (repo, resource)
);

CREATE TABLE github_pull_watch (
    repo       TEXT NOT NULL,
    pr         INTEGER NOT NULL CHECK (pr > 0),
    updated_at TEXT NOT NULL,                            -- the PR's updated_at when last harvested
    state      TEXT NOT NULL,                            -- open | closed | merged
    seen_at    TEXT NOT NULL,
    PRIMARY KEY (repo, pr)
);

-- GitHub writes applied by the `github` family's result handler (issue 16): one row per
-- idempotency key, inserted once when the write job's result is ingested, so a retried or
-- re-delivered result is applied exactly once and the control plane reads what was posted.
CREATE TABLE github_writes (
    write_key  TEXT PRIMARY KEY,                         -- the write's idempotency key (its marker)
    repo       TEXT NOT NULL,                            -- owner/repo
    number     INTEGER NOT NULL CHECK (number > 0),      -- issue or PR number
    url        TEXT NOT NULL,                            -- web URL of the issue or comment
    created    INTEGER NOT NULL CHECK (created IN (0, 1)), -- 0: an earlier post with the marker was found
    job_id     TEXT NOT NULL,
    applied_at TEXT NOT NULL
);
