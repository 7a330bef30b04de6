package tgsqlite

/*
// SQLite is linked into the binary by github.com/mattn/go-sqlite3 (its
// amalgamation, or the system library with its libsqlite3 tag); this file
// only calls it. sqlite3_config is variadic, which cgo cannot call, hence
// the wrapper.
extern int sqlite3_config(int, ...);
extern long long sqlite3_memory_used(void);

static int tgsqlite_memstatus_off(void) {
	return sqlite3_config(9, 0); // SQLITE_CONFIG_MEMSTATUS, off
}
*/
import "C"

// memStatusOff is SQLite's answer to turning its memory statistics off: 0
// (SQLITE_OK) when they are off for the process, 21 (SQLITE_MISUSE) when
// SQLite had already been initialized, so they stay on. Either way
// nothing else changes: the statistics only count.
var memStatusOff = int(C.tgsqlite_memstatus_off())

// sqliteMemoryUsed is sqlite3_memory_used(): the bytes SQLite holds, or 0
// for ever once its memory statistics are off.
func sqliteMemoryUsed() int64 { return int64(C.sqlite3_memory_used()) }
