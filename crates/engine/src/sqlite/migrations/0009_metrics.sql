-- skillforge queue schema, version 9: counters for `/metrics` (issue 36 item 2), kept by
-- triggers in the transaction of every transition, so a scrape reads this small table (O(label
-- sets), never O(jobs)) and no code path that changes a job can forget to count.
--
-- One row per (metric, label set, histogram bucket):
--   depth               jobs now in state `outcome` on `queue` (seeded below from the jobs there)
--   enqueued            jobs created, by queue, workflow, stage
--   started             attempts started (leases), by queue, workflow, stage
--   finished            jobs that reached a final state (`outcome`), by queue, workflow, stage
--   retries             attempts that ended and put the job back in the queue for another one
--   lease_recoveries    leases the reaper found expired (their worker died or hung), by queue
--   fencing_rejections  finishes refused because a newer lease superseded theirs (`queue` '')
--   wait_ms / run_ms    histograms: ms from due to leased, and of each attempt's run; `le` is
--                       the bucket's upper bound in ms (-1 = +Inf), `value` its own count (not
--                       cumulative), `sum` the ms observed in it
-- Counters count from the file's upgrade to version 9 on; `depth` is exact from then on.
CREATE TABLE metrics (
    name     TEXT    NOT NULL,
    queue    TEXT    NOT NULL,
    workflow TEXT    NOT NULL DEFAULT '',
    stage    TEXT    NOT NULL DEFAULT '',
    outcome  TEXT    NOT NULL DEFAULT '',
    le       INTEGER NOT NULL DEFAULT 0,
    value    INTEGER NOT NULL DEFAULT 0,
    sum      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (name, queue, workflow, stage, outcome, le)
) WITHOUT ROWID;

INSERT INTO metrics (name, queue, outcome, value) SELECT 'depth', queue, state, count(*) FROM jobs GROUP BY queue, state;

-- A job's workflow and stage: from its spec (left out of the compact spec when at the
-- baseline, `sqlite/compact.rs`: 'adhoc' and 'run'; an unreadable spec counts as the baseline, so
-- counting never fails a transition).
CREATE TRIGGER metrics_enqueued AFTER INSERT ON job_specs
BEGIN
    INSERT INTO metrics (name, queue, workflow, stage, value)
    SELECT 'enqueued', j.queue, coalesce(CASE WHEN json_valid(NEW.spec) THEN NEW.spec ->> '$.workflow' END, 'adhoc'), coalesce(CASE WHEN json_valid(NEW.spec) THEN NEW.spec ->> '$.stage' END, 'run'), 1
    FROM jobs j WHERE j.seq = NEW.seq
    ON CONFLICT DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER metrics_depth_insert AFTER INSERT ON jobs
BEGIN
    INSERT INTO metrics (name, queue, outcome, value) VALUES ('depth', NEW.queue, NEW.state, 1)
    ON CONFLICT DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER metrics_depth_delete AFTER DELETE ON jobs
BEGIN
    UPDATE metrics SET value = value - 1
    WHERE name = 'depth' AND queue = OLD.queue AND workflow = '' AND stage = '' AND outcome = OLD.state AND le = 0;
END;

CREATE TRIGGER metrics_state AFTER UPDATE OF state ON jobs WHEN OLD.state <> NEW.state
BEGIN
    UPDATE metrics SET value = value - 1
    WHERE name = 'depth' AND queue = OLD.queue AND workflow = '' AND stage = '' AND outcome = OLD.state AND le = 0;
    INSERT INTO metrics (name, queue, outcome, value) VALUES ('depth', NEW.queue, NEW.state, 1)
    ON CONFLICT DO UPDATE SET value = value + 1;
    INSERT INTO metrics (name, queue, workflow, stage, outcome, value)
    SELECT 'finished', NEW.queue, coalesce(CASE WHEN json_valid(s.spec) THEN s.spec ->> '$.workflow' END, 'adhoc'), coalesce(CASE WHEN json_valid(s.spec) THEN s.spec ->> '$.stage' END, 'run'), NEW.state, 1
    FROM job_specs s WHERE s.seq = NEW.seq AND NEW.state IN ('succeeded', 'failed', 'dead', 'cancelled', 'stale')
    ON CONFLICT DO UPDATE SET value = value + 1;
    INSERT INTO metrics (name, queue, value)
    SELECT 'retries', NEW.queue, 1
    WHERE OLD.state = 'running' AND NEW.state = 'queued' AND coalesce(NEW.attempt_result, '') NOT IN ('released', 'stale')
    ON CONFLICT DO UPDATE SET value = value + 1;
    INSERT INTO metrics (name, queue, value)
    SELECT 'lease_recoveries', NEW.queue, 1
    WHERE OLD.state = 'running' AND NEW.attempt_result = 'stale'
    ON CONFLICT DO UPDATE SET value = value + 1;
    INSERT INTO metrics (name, queue, workflow, stage, le, value, sum)
    SELECT 'run_ms', NEW.queue, coalesce(CASE WHEN json_valid(s.spec) THEN s.spec ->> '$.workflow' END, 'adhoc'), coalesce(CASE WHEN json_valid(s.spec) THEN s.spec ->> '$.stage' END, 'run'),
        CASE WHEN d.ms <= 10 THEN 10 WHEN d.ms <= 100 THEN 100 WHEN d.ms <= 1000 THEN 1000
             WHEN d.ms <= 5000 THEN 5000 WHEN d.ms <= 30000 THEN 30000 WHEN d.ms <= 120000 THEN 120000
             WHEN d.ms <= 600000 THEN 600000 WHEN d.ms <= 3600000 THEN 3600000 ELSE -1 END,
        1, d.ms
    FROM job_specs s, (SELECT max(0, coalesce(NEW.attempt_ended_at_ms, NEW.updated_at_ms) - NEW.acquired_at_ms) AS ms) d
    WHERE s.seq = NEW.seq AND OLD.state = 'running' AND NEW.acquired_at_ms IS NOT NULL
    ON CONFLICT DO UPDATE SET value = value + 1, sum = sum + excluded.sum;
END;

-- A lease (the only statement that raises a running job's `fencing_token`).
CREATE TRIGGER metrics_started AFTER UPDATE OF fencing_token ON jobs
WHEN NEW.state = 'running' AND NEW.fencing_token > OLD.fencing_token
BEGIN
    INSERT INTO metrics (name, queue, workflow, stage, value)
    SELECT 'started', NEW.queue, coalesce(CASE WHEN json_valid(s.spec) THEN s.spec ->> '$.workflow' END, 'adhoc'), coalesce(CASE WHEN json_valid(s.spec) THEN s.spec ->> '$.stage' END, 'run'), 1
    FROM job_specs s WHERE s.seq = NEW.seq
    ON CONFLICT DO UPDATE SET value = value + 1;
    INSERT INTO metrics (name, queue, workflow, stage, le, value, sum)
    SELECT 'wait_ms', NEW.queue, coalesce(CASE WHEN json_valid(s.spec) THEN s.spec ->> '$.workflow' END, 'adhoc'), coalesce(CASE WHEN json_valid(s.spec) THEN s.spec ->> '$.stage' END, 'run'),
        CASE WHEN d.ms <= 10 THEN 10 WHEN d.ms <= 100 THEN 100 WHEN d.ms <= 1000 THEN 1000
             WHEN d.ms <= 5000 THEN 5000 WHEN d.ms <= 30000 THEN 30000 WHEN d.ms <= 120000 THEN 120000
             WHEN d.ms <= 600000 THEN 600000 WHEN d.ms <= 3600000 THEN 3600000 ELSE -1 END,
        1, d.ms
    FROM job_specs s, (SELECT max(0, coalesce(NEW.acquired_at_ms, NEW.updated_at_ms) - OLD.not_before_ms) AS ms) d
    WHERE s.seq = NEW.seq
    ON CONFLICT DO UPDATE SET value = value + 1, sum = sum + excluded.sum;
END;
