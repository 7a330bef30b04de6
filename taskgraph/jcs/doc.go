// Package jcs is the module's one RFC 8785 (JSON Canonicalization Scheme)
// implementation, a leaf package that imports only the standard library.
// The manifest (package manifest: digests, receipts, profiles) and the
// store's audit trail (package taskgraph: event and audit-chain hashes,
// audit export, audit verify) both use it.
//
// It has three faces over one set of rules:
//
//   - Canonicalize, CanonicalizeValue, Parse and WriteCanonical: a strict
//     parser of any JSON text and the writer of its canonical form.
//   - Append, AppendString, AppendInt: an encoder of values built in code
//     (maps, strings, integers, canonical raw JSON), for the store's hot
//     path, with no round trip through encoding/json.
//   - IsCanonicalFast, IsCanonical, CompactMembers: recognisers of stored
//     text, the fast one for the compact form the store writes.
//
// # Invariants
//
//   - Object members are ordered by the UTF-16 code units of their names
//     (CompareKeys), everywhere: Canonicalize, Append and the recognisers.
//     This differs from byte order only for names mixing characters beyond
//     U+FFFF with ones in U+E000-U+FFFF; TestAppendOrdersNonBMPKeysByUTF16
//     and TestCompareKeysIsUTF16Order pin it.
//   - Append's output is what Canonicalize makes of the same value
//     marshalled by encoding/json (FuzzAppend), and IsCanonicalFast accepts
//     only text Canonicalize leaves unchanged (FuzzIsCanonical). A value
//     Append cannot write exactly (another type, an integer beyond ±2^53)
//     is an error matching ErrUnsupported, never an approximation.
//   - Input whose canonical form would depend on the parser (malformed
//     JSON, invalid UTF-8, a lone surrogate escape, a duplicate name, a
//     number beyond the double range, nesting deeper than MaxDepth) is an
//     error matching ErrInvalidJSON. Strings built in code are coerced to
//     valid UTF-8 (each bad byte becomes U+FFFD) by AppendString.
//   - Numbers are IEEE 754 doubles written as ECMAScript's
//     Number.prototype.toString writes them (RFC 8785 Appendix B vectors).
//
// Why not a library: github.com/gowebpki/jcs agreed with this code on a
// 2.1 M-input differential fuzz (code review at 5d40f83), but offers only
// the text-to-text transform; the store needs the typed encoder and the
// recognisers on its hot path, which would remain ours anyway.
package jcs
