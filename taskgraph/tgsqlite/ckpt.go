package tgsqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SQLite copies the WAL back into the database file at checkpoints. By
// default the connection that commits a transaction that takes the WAL
// past 1,000 pages runs the checkpoint inside that commit: the writer,
// which is the store's bottleneck, would spend a large share of its time
// copying pages and syncing the database file while every operation of the
// batch waits. So the writer's own threshold is raised to
// writerAutoCheckpoint pages (a safety net), and a checkpointer goroutine,
// on a connection of its own, runs a PASSIVE checkpoint after a commit that
// leaves the WAL at checkpointAt bytes or more (about SQLite's own 1,000
// pages), at most every checkpointEvery: it copies what no reader still
// needs, never waits for a reader and never blocks the writer, and it runs
// on the other core while the writer keeps committing. Durability does not change: a
// commit is durable when its WAL frames are (SyncFull syncs the WAL at
// every commit), whoever copies them later.
//
// checkpointAt tests the -wal file's size, which SQLite never shrinks: once
// the file has grown past it, every commit asks for a checkpoint, and
// checkpointEvery alone paces them. Each checkpoint syncs the WAL and the
// database file and copies every page changed since the one before; the
// pages a busy writer changes (index leaves, the tails of tasks and events)
// change in nearly every commit, so the spacing sets how often each is
// copied. At 20 ms the bench's checkpoints (50 a second) copied about 200
// new frames each and wrote 453 MB for its 20,000 cycles; at 100 ms, about
// SQLite's own 1,000 pages a checkpoint at the writer's top rate, 10 a
// second, 413-423 MB, with the writer's throughput no lower (issue 23).
const (
	writerAutoCheckpoint = 10000
	checkpointAt         = 4 << 20
	checkpointEvery      = 100 * time.Millisecond
)

// checkpointer runs the background checkpoints until the driver closes.
type checkpointer struct {
	d    *Driver
	db   *sql.DB // one connection, this goroutine's
	kick chan struct{}
}

// kicked asks for a checkpoint soon. It never blocks.
func (c *checkpointer) kicked() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer c.d.wg.Done()
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-c.d.quit:
			return
		case <-c.kick:
		}
		// A checkpoint through a replaced -shm would copy pages by a stale
		// index: once the files changed, nothing more runs on them.
		if err := c.d.checkFiles(); err != nil {
			continue
		}
		if _, err := c.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
			c.d.log.Debug("background checkpoint failed; the next will try again", "err", err)
		}
		t.Reset(checkpointEvery)
		select {
		case <-c.d.quit:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// startCheckpointer opens the checkpointer's connection, raises the
// writer's own threshold and starts the goroutine.
func (d *Driver) startCheckpointer() error {
	db, err := openDB(d.path, d.opts, false)
	if err != nil {
		return fmt.Errorf("open the checkpoint connection: %w", err)
	}
	if _, err := d.wdb.Exec(fmt.Sprintf(`PRAGMA wal_autocheckpoint = %d`, writerAutoCheckpoint)); err != nil {
		db.Close()
		return fmt.Errorf("set the writer's checkpoint threshold: %w", err)
	}
	d.ckpt = &checkpointer{d: d, db: db, kick: make(chan struct{}, 1)}
	d.wg.Add(1)
	go d.ckpt.run()
	return nil
}
