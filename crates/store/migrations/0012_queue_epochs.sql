-- The epoch of each queue namespace this home's control plane last saw (issue 32 item 5): a
-- Redis namespace that lost its data while no process watched it (restart without persistence,
-- flush) has another epoch when the next control plane connects, which compares it with this
-- row instead of only with what a running process remembered.
CREATE TABLE queue_epochs (
    queue   TEXT PRIMARY KEY NOT NULL,
    epoch   TEXT NOT NULL,
    seen_at TEXT NOT NULL
);
