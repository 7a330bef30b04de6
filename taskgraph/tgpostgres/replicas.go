package tgpostgres

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// The replicas serving a database. Each driver's listener holds, on its own
// connection and for as long as that connection lives, a session advisory
// lock of class replicaLockClass (pg_try_advisory_lock(int, int), the
// second key random); a driver counts the granted locks of that class on
// its database in pg_locks, which every role may read, every
// replicaCountInterval. A replica that stops, or loses its listener's
// connection, releases its lock with the connection, so the count follows
// the replicas live on the database without a table of them. A read-only
// driver (an operator's command) runs no listener and is not counted; a
// database without LISTEN counts one.
const (
	// replicaLockClass is the first key of the replicas' advisory locks
	// ("gem1"). The schema's migration lock is a one-key lock
	// (objsubid 1) and never matches.
	replicaLockClass = 0x67656d31
	// replicaCountInterval is how often a driver counts the replicas.
	replicaCountInterval = 500 * time.Millisecond
)

// sqlCountReplicas counts the replicas' locks held on this database.
var sqlCountReplicas = `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
	AND classid = ` + strconv.Itoa(replicaLockClass) + ` AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// Replicas returns how many replicas, this one included, held their
// listener's lock on the database at the driver's last count: at least 1
// (tgdriver.ReplicaCounter).
func (d *Driver) Replicas() int { return int(max(d.replicas.Load(), 1)) }

// holdReplicaLock takes the replica's advisory lock on conn, the
// listener's connection. A key another replica holds (1 in 2^31) is drawn
// again. A database that refuses advisory locks leaves the replica
// uncounted: the others then count one fewer, which only paces their hot
// lanes as for fewer replicas.
func (d *Driver) holdReplicaLock(ctx context.Context, conn *pgx.Conn) {
	for range 4 {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1::int, $2::int)`, replicaLockClass, rand.Int32()).Scan(&ok); err != nil {
			if ctx.Err() == nil {
				d.log.Info("the replica's advisory lock could not be taken; other replicas will not count this one", "err", d.classify(ctx, err))
			}
			return
		}
		if ok {
			return
		}
	}
}

// countReplicas counts the replicas now.
func (d *Driver) countReplicas(ctx context.Context) error {
	var n int64
	if err := d.pool.QueryRow(ctx, sqlCountReplicas).Scan(&n); err != nil {
		return err
	}
	d.replicas.Store(max(n, 1))
	return nil
}

// watchReplicas counts the replicas every replicaCountInterval until ctx
// ends. A count that fails keeps the last one; the first failure is
// logged.
func (d *Driver) watchReplicas(ctx context.Context) {
	defer d.wg.Done()
	t := time.NewTicker(replicaCountInterval)
	defer t.Stop()
	warned := false
	for {
		if err := d.countReplicas(ctx); err != nil && ctx.Err() == nil && !warned {
			warned = true
			d.log.Info("could not count the replicas on the database; pacing as for the last count", "err", d.classify(ctx, err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
