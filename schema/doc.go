// Package schema owns the task store's schemas: two series of numbered SQL
// migrations embedded in the binary, one per database (migrations/sqlite and
// migrations/postgres), and the functions that apply and inspect the SQLite
// series. The PostgreSQL series is applied by the tgpostgres driver, which
// reads it through PostgresMigrations.
//
// # Invariants
//
//   - Migrations are files named NNNN_description.sql in their database's
//     folder, numbered from 1 without gaps; a build with a gap or a duplicate number
//     fails at the first Apply (and in this package's tests).
//   - Apply runs every migration the database lacks, in order, inside one
//     write transaction, and records the resulting version in the
//     schema_version table in that same transaction: a crash or an error
//     leaves the database at its previous version, never half-migrated.
//   - A database whose recorded version is newer than the newest migration
//     this binary carries is refused with an error matching ErrTooNew, and
//     nothing is written to it. A database with tables but no schema_version
//     table belongs to another program and is refused with ErrForeign.
//     Inspect tells both without writing, so a caller can refuse the file
//     before it opens it for writing (which may change its journal mode).
//   - RequireLatest accepts only a database at exactly the newest version
//     and refuses an older one with ErrTooOld, without writing: a read-only
//     opener reads only a schema it knows and never migrates.
package schema
