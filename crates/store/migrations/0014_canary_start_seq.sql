-- Issue 37 item 1: a canary's window counts only the outcomes written after it started. Feedback
-- events carry a one-second `created_at` (the wire format's RFC 3339), so an outcome written in the
-- second before the start counted toward the window. The start records the last feedback event's
-- rowid; the window reads rows after it. NULL for canaries started before this migration.
ALTER TABLE agent_template_versions ADD COLUMN canary_started_seq INTEGER;
