-- 0002: lease time runs only while the server runs.
-- Each claim keeps its lease duration, so that leases can be moved forward by
-- the time the server was away (a restart, a pause, a clock step) and never
-- left longer than their own duration.
ALTER TABLE tasks ADD COLUMN lease_ms INTEGER CHECK (lease_ms IS NULL OR lease_ms > 0);

-- Claims made before this migration: the lease was set (claim or heartbeat)
-- at the task's last update.
UPDATE tasks SET lease_ms = MAX(1000, MIN(900000, lease_expires_at_ms - updated_at_ms))
    WHERE state = 'claimed' AND lease_expires_at_ms IS NOT NULL;

-- The last wall time at which the server's store was known to be running,
-- written by it with every commit, while leases are live, and at close.
CREATE TABLE server_clock (
    singleton   INTEGER PRIMARY KEY CHECK (singleton = 1),
    alive_at_ms INTEGER NOT NULL
);
