-- Live A/B picks still owed (issue 15; seed: SkillOpt, "Live-traffic A/B interception (#482)";
-- S-72, S-73): an intercepted ask whose pick was not captured at ask time keeps both answers and
-- the label shuffle it showed, so the human's pick can be recorded afterwards
-- (`skillforge live-ab pick`) through the same path as a manual A/B. The row is deleted in the
-- transaction that records the pick. Times are RFC 3339 TEXT.
CREATE TABLE skillopt_live_ab_pending (
    pick_id               TEXT PRIMARY KEY,
    template_id           TEXT NOT NULL,
    champion_version_id   TEXT NOT NULL,
    challenger_version_id TEXT NOT NULL,
    prompt                TEXT NOT NULL,
    champion_answer       TEXT NOT NULL,
    challenger_answer     TEXT NOT NULL,
    challenger_label      TEXT NOT NULL CHECK (challenger_label IN ('a', 'b')),
    created_at            TEXT NOT NULL
);
