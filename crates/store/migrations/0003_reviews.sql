-- Eval review runs, their items and ranked options, and the human feedback on them (seed
-- "Human Feedback Trial Happy Path", "Markdown Feedback Packet", "Ranked Exploration Workflow";
-- table and column names as the SkillOpt store names them, facts §8). All times are RFC 3339 TEXT.
-- Artifact ids refer to eval_artifacts (0002) and template ids to agent_templates; neither is a
-- foreign key so a run survives template clean-up the way the SkillOpt store's rows do.

-- One review run of a template version. mode: explore|refine|distill|validate; exploration_level:
-- high|medium|low; options_count ≥ 2 (defaults as the SkillOpt store: validate, low, 2).
CREATE TABLE eval_runs (
    id                  TEXT PRIMARY KEY,
    template_id         TEXT NOT NULL,
    template_version_id TEXT NOT NULL,
    target_repo         TEXT NOT NULL DEFAULT '',
    state               TEXT NOT NULL DEFAULT 'draft',
    metadata_json       TEXT NOT NULL DEFAULT '',
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    mode                TEXT NOT NULL DEFAULT 'validate'
                        CHECK (mode IN ('explore', 'refine', 'distill', 'validate')),
    exploration_level   TEXT NOT NULL DEFAULT 'low' CHECK (exploration_level IN ('high', 'medium', 'low')),
    options_count       INTEGER NOT NULL DEFAULT 2 CHECK (options_count >= 2)
);
CREATE INDEX idx_eval_runs_template ON eval_runs (template_id, created_at);

-- One review item, id "<run>/<item>"; the *_artifact_id columns are '' when unset.
CREATE TABLE eval_review_items (
    id                    TEXT PRIMARY KEY,
    run_id                TEXT NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
    item_id               TEXT NOT NULL,
    title                 TEXT NOT NULL DEFAULT '',
    source_artifact_id    TEXT NOT NULL DEFAULT '',
    baseline_artifact_id  TEXT NOT NULL DEFAULT '',
    candidate_artifact_id TEXT NOT NULL DEFAULT '',
    preview_artifact_id   TEXT NOT NULL DEFAULT '',
    diff_artifact_id      TEXT NOT NULL DEFAULT '',
    metadata_json         TEXT NOT NULL DEFAULT '',
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL,
    UNIQUE (run_id, item_id)
);

-- One blind ranked option of an item, id "<run>/<item>/<label>"; labels are lowercase.
CREATE TABLE eval_review_options (
    id            TEXT PRIMARY KEY,
    run_id        TEXT NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
    item_id       TEXT NOT NULL,
    label         TEXT NOT NULL,
    artifact_id   TEXT NOT NULL,
    role          TEXT NOT NULL DEFAULT '',
    metadata_json TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    UNIQUE (run_id, item_id, label)
);

-- A/B feedback, choice de-blinded (a = baseline, b = candidate); a re-import of the same
-- response updates the row in place under the five-column key (facts §4).
CREATE TABLE feedback_events (
    id         TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
    item_id    TEXT NOT NULL,
    choice     TEXT NOT NULL CHECK (choice IN ('a', 'b', 'tie', 'neither', 'skip')),
    reasoning  TEXT NOT NULL DEFAULT '',
    reviewer   TEXT NOT NULL,
    source     TEXT NOT NULL,
    source_url TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    UNIQUE (run_id, item_id, reviewer, source, source_url)
);

-- N-way ranked feedback; *_json columns hold JSON ('' when absent); same conflict key.
CREATE TABLE ranked_feedback_events (
    id                         TEXT PRIMARY KEY,
    run_id                     TEXT NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
    item_id                    TEXT NOT NULL,
    ranking_json               TEXT NOT NULL,
    winner                     TEXT NOT NULL DEFAULT '',
    useful_traits_json         TEXT NOT NULL DEFAULT '',
    rejected_traits_json       TEXT NOT NULL DEFAULT '',
    reasoning                  TEXT NOT NULL DEFAULT '',
    reviewer                   TEXT NOT NULL,
    source                     TEXT NOT NULL,
    source_url                 TEXT NOT NULL DEFAULT '',
    created_at                 TEXT NOT NULL,
    quality                    TEXT NOT NULL DEFAULT '',
    continue_mode              TEXT NOT NULL DEFAULT '',
    promote                    TEXT NOT NULL DEFAULT '',
    required_improvements_json TEXT NOT NULL DEFAULT '',
    tie_groups_json            TEXT NOT NULL DEFAULT '',
    UNIQUE (run_id, item_id, reviewer, source, source_url)
);
