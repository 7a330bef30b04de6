// Package manifest defines the server's least-authority surface and the
// hashed capability manifest that describes it, with the RFC 8785 JSON
// canonicalization and SHA-256 digests they rest on.
//
// # Surface
//
// A worker agent can reach the store only through seven MCP tools
// (AllTools), MCP resources, and two MCP extensions. Operator operations
// (requeue, skip, prune) are human-only: no surface exposes them, and every
// manifest says so with humanOnlyOperationsExposed: false.
//
// # Profiles only narrow
//
// The widest surface is DefaultProfile. A Profile, and the runtime switches
// in Options, can only remove from it: Profile.Effective drops names that
// are not tools, and NewSurface intersects the profile with the switches.
// Nothing a profile file says can add a tool, an extension or a resource.
// Features that depend on others fall with them: the tasks extension needs
// graph_task_create and graph_task_inspect, skills need resources and a
// loaded skills directory. ParseProfile is strict (unknown keys, unknown
// tools, wrong types, duplicates and explicit contradictions are errors),
// so a typo cannot silently leave authority in place.
//
// # Manifest
//
// Build describes a Surface as a JSON object with a fixed set of keys
// (ManifestKeys): protocol versions, tools, resources, extensions, skill
// URIs, and the store's and transport's limits. Its sha256 member is the
// Digest of the RFC 8785 canonical form of the object without sha256, so
// the digest covers every other member and nothing but them; Verify
// recomputes it. Manifest.Bytes is the canonical form with sha256 included
// and no trailing newline: the same surface and limits always give the
// same bytes and digest, and any change to them changes the digest.
// The store's limits come from the leaf package taskgraph/limits, which the
// store re-exports and enforces: the manifest imports no store code and no
// database driver (TestManifestImportsNoStore).
//
// # Receipts
//
// ReceiptSHA256 binds one operation (its verb), one task, and the lease
// generation at which it ran to the manifest digest in force, as the Digest
// of the canonical {"generation", "manifestSha256", "operation", "taskId"}
// object. A receipt therefore proves which surface an operation ran under,
// and cannot be replayed for another task, operation or generation.
//
// # Canonical JSON
//
// The one RFC 8785 implementation of the module is package taskgraph/jcs,
// which the store's audit trail uses too: members sorted by UTF-16 code
// units, minimal string escaping, numbers as IEEE 754 doubles written as
// ECMAScript writes them. Input whose canonical form would depend on the
// parser (duplicate member names, lone surrogates, invalid UTF-8, numbers
// beyond the double range) is rejected with an error matching
// ErrInvalidJSON, never guessed at. Integers above 2^53-1 lose precision,
// as the RFC prescribes; the manifest and receipts never contain such
// integers (Build and ReceiptSHA256 refuse them).
package manifest
