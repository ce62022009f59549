-- The merge side of the empty gate (seed "Automatic trace-harvested feedback (Mode A, off by
-- default)" › Outcome → score: a second zero-external observation at the same head at least
-- [merge_gate] min_ci_wait later, plus .github/workflows/ awareness, before gitmoot/ci is
-- stamped; S-19). One row per observation `skillforge harvest gate` made; a repeated call with
-- the same (repo, pr, head, observed_at) is the same observation (idempotent). The stamp itself is
-- a harvest_ci_observations row (gitmoot/ci, success, "no external CI") at the head.
CREATE TABLE merge_gate_observations (
    repo              TEXT NOT NULL,               -- owner/repo
    pr                INTEGER NOT NULL CHECK (pr > 0),
    head              TEXT NOT NULL,               -- PR head SHA observed
    observed_at       TEXT NOT NULL,               -- RFC 3339 UTC, millisecond precision
    external_contexts INTEGER NOT NULL CHECK (external_contexts >= 0),
    workflows         TEXT NOT NULL CHECK (workflows IN ('present', 'absent', 'unknown')),
    decision          TEXT NOT NULL CHECK (decision IN ('external', 'stamp', 'wait', 'blocked')),
    PRIMARY KEY (repo, pr, head, observed_at)
);
