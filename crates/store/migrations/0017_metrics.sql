-- Counters of `/metrics` that live in the domain store (issue 36 item 2), kept by triggers as
-- results are applied and decisions written, so a scrape reads this small table (O(label sets))
-- and no writer can forget to count. Seeded from the rows already there.
--
--   results_applied      results applied exactly once, by workflow (a), stage (b), state (c)
--   agent_input_tokens   tokens an agent run reported, by runtime (a) and model (b; 'unknown'
--   agent_output_tokens  when its transcript did not say); a run that reported none adds nothing
--   agent_cost_usd       cost in US dollars a runtime reported, likewise
--   agent_runs_usage_unknown  agent runs applied without usage (their tokens are not counted)
--   bineval_verdicts     BINEVAL answers, by verdict (a: yes | no)
--   promotion_events     promotion log entries, by event (a: candidate.promoted,
--                        candidate.rolled_back, candidate.canary_graduated, …)
CREATE TABLE metric_counters (
    name  TEXT NOT NULL,
    a     TEXT NOT NULL DEFAULT '',
    b     TEXT NOT NULL DEFAULT '',
    c     TEXT NOT NULL DEFAULT '',
    value REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (name, a, b, c)
) WITHOUT ROWID;

INSERT INTO metric_counters (name, a, b, c, value)
    SELECT 'results_applied', workflow, stage, state, count(*) FROM applied_results GROUP BY workflow, stage, state;
INSERT INTO metric_counters (name, a, value)
    SELECT 'bineval_verdicts', verdict, count(*) FROM skillopt_binary_verdicts GROUP BY verdict;
INSERT INTO metric_counters (name, a, value)
    SELECT 'promotion_events', event, count(*) FROM promotion_events GROUP BY event;
INSERT INTO metric_counters (name, a, b, value)
    SELECT 'agent_input_tokens', r.runtime, r.model, sum(r.input) FROM (
        SELECT outcome_json ->> '$.detail.runtime' AS runtime, coalesce(outcome_json ->> '$.detail.model', 'unknown') AS model,
               outcome_json ->> '$.detail.usage.input_tokens' AS input
        FROM applied_results WHERE json_valid(outcome_json)) r
    WHERE r.runtime IS NOT NULL AND r.input IS NOT NULL GROUP BY r.runtime, r.model;
INSERT INTO metric_counters (name, a, b, value)
    SELECT 'agent_output_tokens', r.runtime, r.model, sum(r.output) FROM (
        SELECT outcome_json ->> '$.detail.runtime' AS runtime, coalesce(outcome_json ->> '$.detail.model', 'unknown') AS model,
               outcome_json ->> '$.detail.usage.output_tokens' AS output
        FROM applied_results WHERE json_valid(outcome_json)) r
    WHERE r.runtime IS NOT NULL AND r.output IS NOT NULL GROUP BY r.runtime, r.model;
INSERT INTO metric_counters (name, a, b, value)
    SELECT 'agent_cost_usd', r.runtime, r.model, sum(r.cost) FROM (
        SELECT outcome_json ->> '$.detail.runtime' AS runtime, coalesce(outcome_json ->> '$.detail.model', 'unknown') AS model,
               outcome_json ->> '$.detail.usage.cost_usd' AS cost
        FROM applied_results WHERE json_valid(outcome_json)) r
    WHERE r.runtime IS NOT NULL AND r.cost IS NOT NULL GROUP BY r.runtime, r.model;

CREATE TRIGGER metric_results_applied AFTER INSERT ON applied_results
BEGIN
    INSERT INTO metric_counters (name, a, b, c, value) VALUES ('results_applied', NEW.workflow, NEW.stage, NEW.state, 1)
    ON CONFLICT DO UPDATE SET value = value + 1;
    INSERT INTO metric_counters (name, a, b, value)
    SELECT 'agent_input_tokens', r.runtime, r.model, r.n FROM (
        SELECT NEW.outcome_json ->> '$.detail.runtime' AS runtime, coalesce(NEW.outcome_json ->> '$.detail.model', 'unknown') AS model,
               NEW.outcome_json ->> '$.detail.usage.input_tokens' AS n WHERE json_valid(NEW.outcome_json)) r
    WHERE r.runtime IS NOT NULL AND r.n IS NOT NULL
    ON CONFLICT DO UPDATE SET value = value + excluded.value;
    INSERT INTO metric_counters (name, a, b, value)
    SELECT 'agent_output_tokens', r.runtime, r.model, r.n FROM (
        SELECT NEW.outcome_json ->> '$.detail.runtime' AS runtime, coalesce(NEW.outcome_json ->> '$.detail.model', 'unknown') AS model,
               NEW.outcome_json ->> '$.detail.usage.output_tokens' AS n WHERE json_valid(NEW.outcome_json)) r
    WHERE r.runtime IS NOT NULL AND r.n IS NOT NULL
    ON CONFLICT DO UPDATE SET value = value + excluded.value;
    INSERT INTO metric_counters (name, a, b, value)
    SELECT 'agent_cost_usd', r.runtime, r.model, r.n FROM (
        SELECT NEW.outcome_json ->> '$.detail.runtime' AS runtime, coalesce(NEW.outcome_json ->> '$.detail.model', 'unknown') AS model,
               NEW.outcome_json ->> '$.detail.usage.cost_usd' AS n WHERE json_valid(NEW.outcome_json)) r
    WHERE r.runtime IS NOT NULL AND r.n IS NOT NULL
    ON CONFLICT DO UPDATE SET value = value + excluded.value;
END;

CREATE TRIGGER metric_bineval_verdicts AFTER INSERT ON skillopt_binary_verdicts
BEGIN
    INSERT INTO metric_counters (name, a, value) VALUES ('bineval_verdicts', NEW.verdict, 1)
    ON CONFLICT DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER metric_promotion_events AFTER INSERT ON promotion_events
BEGIN
    INSERT INTO metric_counters (name, a, value) VALUES ('promotion_events', NEW.event, 1)
    ON CONFLICT DO UPDATE SET value = value + 1;
END;
