package tgsqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// startWatch notices writes made through other connections (an operator
// command, another server) through PRAGMA data_version, which changes on one
// connection whenever any other connection commits, and then sends a
// tgdriver.Change{Unknown: true} on Changes without blocking (the channel
// holds one: changes coalesce). The baseline is read before Open returns, so
// no write made after Open can be missed. Each tick also checks the database
// files (checkFiles), so a replaced file trips even an idle driver and Ready
// reports it.
func (d *Driver) startWatch(ctx context.Context) error {
	conn, err := d.rdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("start change watcher: %w", err)
	}
	var last int64
	if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&last); err != nil {
		conn.Close()
		return fmt.Errorf("start change watcher: %w", err)
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer conn.Close()
		t := time.NewTicker(d.opts.WatchInterval)
		defer t.Stop()
		for {
			select {
			case <-d.quit:
				return
			case <-t.C:
			}
			// The same tick notices replaced database files on an idle
			// driver (a busy one notices them at every batch); a trip is
			// logged and answered by checkFiles itself.
			_ = d.checkFiles()
			var v int64
			if err := conn.QueryRowContext(context.Background(), `PRAGMA data_version`).Scan(&v); err != nil {
				d.log.Warn("read data_version", "err", err)
				continue
			}
			if v != last {
				last = v
				select {
				case d.changes <- tgdriver.Change{Unknown: true}:
				default: // one is already waiting: it covers this one
				}
			}
		}
	}()
	return nil
}
