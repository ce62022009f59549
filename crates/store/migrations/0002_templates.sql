-- Agent templates, their versions, eval artifacts and candidate reviews (seed "Candidate Package";
-- table and column names as the SkillOpt store names them, facts §8). All times are RFC 3339 TEXT.

-- One row per installed template. `content`/`metadata_json`/source columns mirror the current
-- version; `latest_version_id` is the highest version number ever created.
CREATE TABLE agent_templates (
    id                 TEXT PRIMARY KEY,
    name               TEXT NOT NULL DEFAULT '',
    description        TEXT NOT NULL DEFAULT '',
    source_repo        TEXT NOT NULL DEFAULT '',
    source_ref         TEXT NOT NULL DEFAULT '',
    source_path        TEXT NOT NULL DEFAULT '',
    resolved_commit    TEXT NOT NULL DEFAULT '',
    content            TEXT NOT NULL DEFAULT '',
    metadata_json      TEXT NOT NULL DEFAULT '{}',
    current_version_id TEXT,
    latest_version_id  TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);

-- Versions `<template>@v<N>`; state is one of current, pending, rejected, superseded, canary.
-- At most one `current` per template (partial unique index below).
CREATE TABLE agent_template_versions (
    id                TEXT PRIMARY KEY,
    template_id       TEXT NOT NULL REFERENCES agent_templates (id),
    version           INTEGER NOT NULL CHECK (version >= 1),
    state             TEXT NOT NULL CHECK (state IN ('current', 'pending', 'rejected', 'superseded', 'canary')),
    name              TEXT NOT NULL DEFAULT '',
    description       TEXT NOT NULL DEFAULT '',
    source_repo       TEXT NOT NULL DEFAULT '',
    source_ref        TEXT NOT NULL DEFAULT '',
    source_path       TEXT NOT NULL DEFAULT '',
    resolved_commit   TEXT NOT NULL DEFAULT '',
    content_hash      TEXT NOT NULL,
    content           TEXT NOT NULL,
    metadata_json     TEXT NOT NULL DEFAULT '{}',
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    promoted_at       TEXT,
    canary_sample     REAL,
    canary_started_at TEXT,
    UNIQUE (template_id, version)
);
CREATE INDEX idx_atv_template ON agent_template_versions (template_id, version);
CREATE INDEX idx_atv_canary ON agent_template_versions (template_id) WHERE state = 'canary';
CREATE UNIQUE INDEX idx_atv_one_current ON agent_template_versions (template_id) WHERE state = 'current';

-- The review record of an imported candidate version; `state`, `decision_reason` and
-- `decided_at` are the audit of promote/reject (S-93).
CREATE TABLE agent_template_candidate_reviews (
    version_id            TEXT PRIMARY KEY REFERENCES agent_template_versions (id),
    template_id           TEXT NOT NULL REFERENCES agent_templates (id),
    base_version_id       TEXT NOT NULL DEFAULT '',
    diff_artifact_id      TEXT NOT NULL DEFAULT '',
    score                 REAL,
    preference_summary    TEXT NOT NULL DEFAULT '',
    eval_report_json      TEXT NOT NULL DEFAULT '',
    summary_metadata_json TEXT NOT NULL DEFAULT '',
    state                 TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'promoted', 'rejected')),
    decision_reason       TEXT NOT NULL DEFAULT '',
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL,
    decided_at            TEXT
);
CREATE INDEX idx_atcr_template ON agent_template_candidate_reviews (template_id, created_at);

-- Artifacts registered in the content-addressed blob store (`<home>/blobs/sha256/<hex[:2]>/<hex>`);
-- `hash` is `sha256:<hex>`.
CREATE TABLE eval_artifacts (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
    driver     TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX idx_eval_artifacts_hash ON eval_artifacts (hash);
