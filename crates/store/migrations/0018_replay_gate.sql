-- The replay gate (issue 34 item 11; facts §7 `gate_enabled` → `gate_blocked`, §8
-- `skillopt_gate_runs`): one row per gate run of a candidate against the champion it was replayed
-- with, over one corpus version. `accepted` = every item scorable on both sides and the
-- candidate's corpus mean strictly above the champion's; `deltas_json` keeps the per-item scores
-- and deltas for audit. Means are NULL when a side had an unscorable item (never a made-up number).
CREATE TABLE skillopt_gate_runs (
    id                   TEXT PRIMARY KEY,
    template_id          TEXT NOT NULL,
    candidate_version_id TEXT NOT NULL,
    champion_version_id  TEXT NOT NULL,
    corpus_path          TEXT NOT NULL,
    corpus_version       INTEGER NOT NULL,
    corpus_items         INTEGER NOT NULL,
    attempts             INTEGER NOT NULL DEFAULT 1,
    accepted             INTEGER NOT NULL DEFAULT 0 CHECK (accepted IN (0, 1)),
    champion_mean        REAL,
    candidate_mean       REAL,
    reason               TEXT NOT NULL DEFAULT '',
    deltas_json          TEXT NOT NULL DEFAULT '[]',
    created_at           TEXT NOT NULL,
    corpus_hash          TEXT NOT NULL DEFAULT ''
);
CREATE INDEX idx_gate_runs_candidate ON skillopt_gate_runs (candidate_version_id, champion_version_id);
