package manifest

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
)

// DigestPrefix starts every digest this package writes.
const DigestPrefix = "sha256:"

// Digest returns "sha256:" followed by the lowercase hexadecimal SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	// Written into one array and copied once into the string: a digest
	// is made for every tool call's receipt.
	var buf [len(DigestPrefix) + 2*sha256.Size]byte
	copy(buf[:], DigestPrefix)
	hex.Encode(buf[len(DigestPrefix):], sum[:])
	return string(buf[:])
}

// DigestJSON returns the Digest of the RFC 8785 canonical form of v as
// encoding/json marshals it (see jcs.CanonicalizeValue).
func DigestJSON(v any) (string, error) {
	b, err := jcs.CanonicalizeValue(v)
	if err != nil {
		return "", err
	}
	return Digest(b), nil
}

// ValidDigest reports whether s has the form Digest writes: "sha256:" and
// exactly 64 lowercase hexadecimal digits.
func ValidDigest(s string) bool {
	if len(s) != len(DigestPrefix)+2*sha256.Size || s[:len(DigestPrefix)] != DigestPrefix {
		return false
	}
	for i := len(DigestPrefix); i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
