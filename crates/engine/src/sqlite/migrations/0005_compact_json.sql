-- skillforge queue schema, version 5: compact `job_specs.spec` and `jobs.outcome` (issue 19).
--
-- From version 5 on, top-level fields of the JobSpec and RunOutcome JSON equal to a frozen
-- baseline (`sqlite/compact.rs`) are left out when written and filled back in when read; a
-- no-op job's spec shrinks from 258 bytes to `{"kind":"noop"}`. Rows written before keep every
-- field and read back unchanged, so nothing is rewritten here: the version bump only makes an
-- older build (which would read a compact spec as corrupt) refuse the file.
SELECT 1;
