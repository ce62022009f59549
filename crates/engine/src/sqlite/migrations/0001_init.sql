-- skillforge queue schema, version 1.
-- Times are ms since the Unix epoch; durations are ms.

CREATE TABLE jobs (
    -- Enqueue order (FIFO tie-break); never reused.
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    -- Job id (UUID v7 text).
    id                 TEXT    NOT NULL UNIQUE,
    queue              TEXT    NOT NULL,
    -- The full JobSpec as JSON; the columns below duplicate what queries need.
    spec               TEXT    NOT NULL,
    idempotency_key    TEXT    UNIQUE,
    state              TEXT    NOT NULL,
    attempts           INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL,
    idempotent         INTEGER NOT NULL,
    heartbeat_ms       INTEGER NOT NULL,
    stale_after_ms     INTEGER NOT NULL,
    fencing_token      INTEGER NOT NULL DEFAULT 0,
    owner_worker       TEXT,
    owner_host         TEXT,
    owner_pid          INTEGER,
    acquired_at_ms     INTEGER,
    heartbeat_at_ms    INTEGER,
    -- heartbeat_at_ms + stale_after_ms while running, else NULL.
    stale_deadline_ms  INTEGER,
    not_before_ms      INTEGER NOT NULL,
    created_at_ms      INTEGER NOT NULL,
    updated_at_ms      INTEGER NOT NULL,
    cancel_requested   INTEGER NOT NULL DEFAULT 0,
    recovery_available INTEGER NOT NULL DEFAULT 0,
    -- RunOutcome JSON of the last finished attempt.
    outcome            TEXT,
    error              TEXT,
    -- 1 while a terminal (or stale) result awaits the control plane's ack.
    result_pending     INTEGER NOT NULL DEFAULT 0
);

-- Leasing: due queued jobs of a queue in (not_before_ms, seq) order, O(log n).
CREATE INDEX jobs_due ON jobs (queue, not_before_ms, seq) WHERE state = 'queued';
-- Reaper: running jobs by stale deadline.
CREATE INDEX jobs_stale ON jobs (stale_deadline_ms) WHERE state = 'running';
-- Results awaiting ingestion, oldest first.
CREATE INDEX jobs_pending ON jobs (updated_at_ms, seq) WHERE result_pending = 1;
-- Listing by state, newest first.
CREATE INDEX jobs_state ON jobs (state, seq);

CREATE TABLE job_attempts (
    job_id         TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt        INTEGER NOT NULL,
    -- Strictly increasing per job, so it keys the attempt even after a retry resets `attempt`.
    fencing_token  INTEGER NOT NULL,
    worker         TEXT    NOT NULL,
    host           TEXT    NOT NULL,
    pid            INTEGER NOT NULL,
    started_at_ms  INTEGER NOT NULL,
    ended_at_ms    INTEGER,
    result         TEXT,
    retry_delay_ms INTEGER,
    PRIMARY KEY (job_id, fencing_token)
) WITHOUT ROWID;

CREATE TABLE locks (
    name            TEXT    PRIMARY KEY,
    -- Kept after release so tokens strictly increase per name.
    fencing_token   INTEGER NOT NULL,
    held            INTEGER NOT NULL,
    owner_worker    TEXT,
    owner_host      TEXT,
    owner_pid       INTEGER,
    acquired_at_ms  INTEGER,
    heartbeat_at_ms INTEGER,
    heartbeat_ms    INTEGER NOT NULL,
    stale_after_ms  INTEGER NOT NULL
);
