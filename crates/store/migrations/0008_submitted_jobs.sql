-- The control plane's record of work it enqueued and has not applied yet (an outbox, issue 12
-- item 6): a row is written when a job is enqueued and deleted in the transaction that applies
-- its first result (`applied::record_applied`), so the table holds only pending work. When a
-- queue loses its data (a Redis namespace emptied), `serve` names these jobs as the missing work.
CREATE TABLE submitted_jobs (
    job_id          TEXT PRIMARY KEY NOT NULL,
    workflow        TEXT NOT NULL,
    stage           TEXT NOT NULL,
    idempotency_key TEXT,
    submitted_at    TEXT NOT NULL
);

-- `applied::applied_by_key` (a re-submit of an applied key, the ingest-side re-run check) looks
-- results up by key: without an index that is a scan of every result ever applied.
CREATE INDEX applied_results_key ON applied_results (idempotency_key) WHERE idempotency_key IS NOT NULL;
