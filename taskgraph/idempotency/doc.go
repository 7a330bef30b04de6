// Package idempotency is the stored form of request ids (taskgraph's
// WithRequestID): the key a request's kept answer is found by (Key), the
// digests of its arguments (Digest), and the sealing of a claim token kept
// in an answer (Seal, Open).
//
// It is a leaf (the standard library only): package taskgraph keeps and
// replays answers in the write's own transaction.
//
// Invariants: every function is pure and deterministic; the database
// holds neither a request id nor a claim token in the clear: the key and
// digests are SHA-256, and a kept token is XORed with an HMAC-SHA256 key
// stream keyed by the request id, so only a caller that presents the id
// again can read it (Open(id, key, Seal(id, key, t)) is t).
package idempotency
