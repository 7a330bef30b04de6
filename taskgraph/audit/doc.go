// Package audit is the history of a task-graph store: its hash format, and
// what reads it (the verifier, the export, the anchors) or links it (the
// linker of journaled events). Package taskgraph writes the history inside
// its transactions with this package's format (the database-wide chain's
// entries through AppendEntry) and opens the doors to the
// readers (Store.VerifyHistory, ExportAudit, AuditHead, CheckAnchor,
// RecentWorkflowHeads, CheckWorkflowAnchor); this package imports no part
// of taskgraph but the seam (tgdriver), the bounds (limits) and the
// canonical-JSON encoder (jcs); taskgraph's seam_test.go keeps it so. A
// store is read through History: its link of what is journaled, its
// consistent snapshots and its server time.
//
// # The format
//
// Each workflow's events form a hash chain in a versioned hash format
// (MCP.md, "Audit trail format"; EventHash, Link): format 2, RFC 8785
// canonical JSON, covers each event's actor, the digests of the content it
// changed (DigestJSON) and the task state it leaves (TaskStateJSON); events
// written before migration 0003 keep format 1 and keep verifying. Every
// workflow's creation, prune, pause and resume is an entry of one
// database-wide audit chain (EntryHash), whose first entry records the
// switch to format 2 and adopts the workflows that existed. ExportEvent
// and ExportEntry write exactly the hashed objects, with their hashes, so
// an outside verifier (scripts/audit-verify.py) recomputes every hash from
// the export alone; TestAuditFormatVectors keeps MCP.md's vectors true.
// Event (with its Actor) is an event as the store's readers see it
// (taskgraph.Event), EventOf and Row convert it from and to the driver's
// row, and ComputeHash hashes it in its own format.
//
// # Verify
//
// Verify checks the audit chain against the stored workflows, every event
// chain, and every task row against the state its last event left and the
// columns fixed at creation against its create event's detail, and reports
// the first broken item. It reads on one snapshot, one goroutine running
// the queries (per workflow, its events then the audited columns of its
// tasks) and a second checking the rows in that order, at most a few
// bounded batches behind: the report is what a sequential walk gives, in
// memory bounded by one workflow's task trails (TestVerifyFigure and
// TestVerifyFigurePostgres measure it). Prune removes finished workflows
// whole and records their final chain head, in their chain and in the
// audit chain, so the other chains keep verifying.
//
// # Anchors
//
// CurrentHead and CheckAnchor detect, against a head kept outside the
// database, a truncation or rollback that leaves every chain consistent;
// RecentWorkflowHeads and CheckWorkflowAnchor name the workflow that lost
// events. Parsing an anchor line is bounded (MaxAnchorLine) and strict.
//
// # Linking
//
// An operation's events are recorded when its transaction ends, in the
// order they happened. With SQLite they are linked into the chain there.
// With PostgreSQL (tgdriver.Info.JournalEvents) they are journaled, and
// the store's Linker links them soon after the commit (it gathers the
// commits of up to 50 ms, or up to 400 ms while its passes find few events,
// or half a linking transaction's worth of events, into one pass), in journal order, which follows the order of commits for
// events that depend on one another (see tgpostgres, "Events"): no writer
// of a task waits for the chain head. Any number of linkers may run on one
// database: linking locks the workflows' rows. Every reader of the history
// (WorkflowEvents, TaskEvents, Verify, Export, the anchors, Prune) links
// what is journaled first.
//
// A linker hashes the bodies of the events its own store journaled from
// the events it was kicked with (their ids set by the driver's Apply:
// tgdriver.JournalIDReader), reading only the journal's ids, and reads back
// the bodies of the others (another process's, or more than linkBodies
// ago). The bodies it keeps are the bytes the writer sent, which the
// database holds as sent; a chain linked from a body the database does
// not hold would fail every verification (Verify hashes what is stored).
//
// Invariants: every stored detail, state and content text is canonical
// JSON, and a hash covers exactly the bytes an export line holds; the
// readers never write but to link; Verify's report is the first broken
// item a sequential walk finds.
package audit
