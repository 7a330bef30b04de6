package tgsqlite

import (
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// SQLite's memory statistics are off for the process: sqlite3_config took
// the setting before SQLite's first use, and a driver that opened, migrated
// and wrote a task left sqlite3_memory_used at 0, as it is only when
// nothing counts (with the statistics on, the open connections alone hold
// hundreds of KB).
func TestMemoryStatisticsOff(t *testing.T) {
	if memStatusOff != 0 {
		t.Fatalf("sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) = %d, want 0 (SQLITE_OK): SQLite was initialized before this package", memStatusOff)
	}
	d := openTest(t, Options{}, tgdriver.Hooks{})
	write(t, d, func(tx tgdriver.Tx) error {
		addTask(t, tx, newTask("wf", "a"))
		return nil
	})
	if n := sqliteMemoryUsed(); n != 0 {
		t.Fatalf("sqlite3_memory_used() = %d bytes, want 0: SQLite still counts its allocations", n)
	}
}
