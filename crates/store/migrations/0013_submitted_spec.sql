-- The spec of each pending job the control plane enqueued (issue 32 item 5), so work a queue
-- lost can be enqueued again as it was asked for (`jobs resubmit-lost`). NULL for rows written
-- by an older build.
ALTER TABLE submitted_jobs ADD COLUMN spec_json TEXT;
