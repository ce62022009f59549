-- Where a PR's template attribution came from (issue 37 item 8): `manual` (`skillforge harvest
-- attribute`, and every row written before this migration) or `trailer` (a `Skillforge-Template:`
-- trailer read from the PR body or one of its commits by the webhook or the PR watcher). A manual
-- attribution is never replaced by a trailer; a trailer attribution is replaced by a manual one.
ALTER TABLE harvest_attributions ADD COLUMN source TEXT NOT NULL DEFAULT 'manual';
