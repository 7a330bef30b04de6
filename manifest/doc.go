// Package manifest defines the server's least-authority surface and the
// hashed capability manifest that describes it, with the RFC 8785 JSON
// canonicalization and SHA-256 digests they rest on.
package manifest
