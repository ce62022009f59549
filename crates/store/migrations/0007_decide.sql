-- Deciding what becomes current (issue 15): BINEVAL verdicts, the Mode B bandit, A/B picks, and
-- the promotion event log (seed: SkillOpt, "Binary evaluation (BINEVAL)", "Champion-challenger
-- A/B preferences (Mode B)", "Promotion policy + notifications"; facts §6, §8). All times are
-- RFC 3339 TEXT. The canary's own columns (canary_sample, canary_started_at, state 'canary') are
-- on agent_template_versions (0002).

-- One BINEVAL answer per (run, question); a re-run upserts in place and keeps the weights the run
-- used, so `binary show` re-aggregates to exactly what `binary run` printed (S-45). facts §8.
CREATE TABLE skillopt_binary_verdicts (
    run_id           TEXT NOT NULL,
    question_id      TEXT NOT NULL,
    dimension        TEXT NOT NULL,
    verdict          TEXT NOT NULL DEFAULT 'no' CHECK (verdict IN ('yes', 'no')),
    explanation      TEXT NOT NULL DEFAULT '',
    question_weight  REAL NOT NULL DEFAULT 1 CHECK (question_weight > 0),
    dimension_weight REAL NOT NULL DEFAULT 1 CHECK (dimension_weight > 0),
    created_at       TEXT NOT NULL,
    PRIMARY KEY (run_id, question_id)
);

-- One Beta-Bernoulli arm per template version: the sufficient statistic (facts §6, §8; S-68).
CREATE TABLE skillopt_bandit_arms (
    template_id         TEXT NOT NULL,
    template_version_id TEXT NOT NULL,
    alpha               REAL NOT NULL DEFAULT 1 CHECK (alpha >= 1),
    beta                REAL NOT NULL DEFAULT 1 CHECK (beta >= 1),
    pulls               INTEGER NOT NULL DEFAULT 0 CHECK (pulls >= 0),
    updated_at          TEXT NOT NULL,
    PRIMARY KEY (template_id, template_version_id)
);

-- Every recorded human A/B pick, keyed by its pick id (derived from the answer job's id): the
-- bandit update is applied only when this row is inserted, in the same transaction, so a
-- retried pick moves the arms once (resolutions 4).
CREATE TABLE skillopt_ab_picks (
    pick_id               TEXT PRIMARY KEY,
    template_id           TEXT NOT NULL,
    champion_version_id   TEXT NOT NULL,
    challenger_version_id TEXT NOT NULL,
    winner                TEXT NOT NULL CHECK (winner IN ('champion', 'challenger')),
    challenger_label      TEXT NOT NULL CHECK (challenger_label IN ('a', 'b')),
    origin                TEXT NOT NULL DEFAULT 'manual' CHECK (origin IN ('manual', 'live')),
    created_at            TEXT NOT NULL
);
CREATE INDEX idx_ab_picks_challenger ON skillopt_ab_picks (challenger_version_id);

-- Events emitted to the [events] sinks, one row per (event, job_id): an event is emitted once
-- (S-52: exactly one awaiting_promotion per newly pending candidate) and the log shows what was sent.
CREATE TABLE promotion_events (
    event       TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    root_id     TEXT NOT NULL,
    detail_json TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    PRIMARY KEY (event, job_id)
);
