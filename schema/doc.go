// Package schema is the one migration runner of the task store's databases.
// Each driver owns its schema: it embeds its numbered SQL migrations
// (tgsqlite/migrations, tgpostgres/migrations) and states its Dialect (the
// few statements of the runner's bookkeeping that differ between
// databases); this package loads a driver's files into a Series (Load) and
// applies and inspects it (Series.Apply, Inspect, RequireLatest) through
// Conn, a two-method view of the driver's transaction (SQL adapts
// database/sql's). Taking the database's migration lock (SQLite's BEGIN
// IMMEDIATE, PostgreSQL's advisory lock) and committing stay the driver's.
//
// # Invariants
//
//   - Migrations are files named NNNN_description.sql in their driver's
//     migrations folder, numbered from 1 without gaps; a build with a gap
//     or a duplicate number fails at the first Load (and in the drivers'
//     and this package's tests).
//   - Apply runs every migration the database lacks, in order, inside the
//     caller's one write transaction, and records the resulting version in
//     the schema_version table in that same transaction: a crash or an
//     error leaves the database at its previous version, never
//     half-migrated.
//   - A database whose recorded version is newer than the newest migration
//     of the series is refused with an error matching ErrTooNew, and
//     nothing is written to it. A database with tables but no
//     schema_version table belongs to another program and is refused with
//     ErrForeign. Inspect tells both without writing, so a caller can
//     refuse the file before it opens it for writing (which may change its
//     journal mode).
//   - RequireLatest accepts only a database at exactly the newest version
//     and refuses an older one with ErrTooOld, without writing: a read-only
//     opener reads only a schema it knows and never migrates.
//   - The runner holds no SQL of either database beyond one portable
//     SELECT of schema_version; everything else comes from the Dialect.
package schema
