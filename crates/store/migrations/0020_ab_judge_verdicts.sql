-- Each judge's own verdict on one A/B (issue 34 item 12): one row per juror, with the judge's
-- runtime and the model its transcript named ('' when it named none), so that a judge's
-- agreement with the human pick of the same A/B (`skillopt_ab_picks.winner`) can be measured
-- (`skillforge judge agreement`). `winner` is NULL when the juror gave no readable pick (a tie or
-- an unreadable verdict). Evidence only: nothing here moves an arm (S-80).
CREATE TABLE skillopt_ab_judge_verdicts (
    pick_id       TEXT NOT NULL,
    juror         INTEGER NOT NULL,
    judge_runtime TEXT NOT NULL,
    judge_model   TEXT NOT NULL DEFAULT '',
    winner        TEXT CHECK (winner IN ('champion', 'challenger')),
    created_at    TEXT NOT NULL,
    PRIMARY KEY (pick_id, juror)
);
