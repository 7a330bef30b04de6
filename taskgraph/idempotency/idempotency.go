package idempotency

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Key is the stored key of request id id of principal for owner: the
// SHA-256 of the three, hex-encoded. The id itself is not stored.
func Key(principal, owner, id string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + owner + "\x00" + id))
	return hex.EncodeToString(sum[:])
}

// Digest is the stored digest of one JSON-encoded argument of a request:
// its SHA-256, hex-encoded.
func Digest(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

// Digests returns the Digest of each argument of args, JSON-encoded.
func Digests(args map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(args))
	for name, v := range args {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode argument %s of a request: %w", name, err)
		}
		out[name] = Digest(b)
	}
	return out, nil
}

// Differ returns, sorted, the names of the arguments whose digests differ
// between a and b, or that only one of them has: nil when the two are the
// same write's.
func Differ(a, b map[string]string) []string {
	var names []string
	for name, d := range a {
		if e, ok := b[name]; !ok || e != d {
			names = append(names, name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// tokenPad is the key stream that seals a claim token of n bytes kept for
// request id under its stored key: HMAC-SHA256 keyed by the request id
// (which the database does not hold) over the request's key and a counter.
func tokenPad(id, key string, n int) []byte {
	var pad []byte
	for i := byte(0); len(pad) < n; i++ {
		m := hmac.New(sha256.New, []byte(id))
		m.Write([]byte("graph-engineering claim token\x00" + key + "\x00"))
		m.Write([]byte{i})
		pad = m.Sum(pad)
	}
	return pad[:n]
}

// Seal is the form of token kept in the answer of request id (stored
// under key): "sealed:" and the token XORed with tokenPad, hex-encoded.
func Seal(id, key, token string) string {
	b := []byte(token)
	pad := tokenPad(id, key, len(b))
	for i := range b {
		b[i] ^= pad[i]
	}
	return "sealed:" + hex.EncodeToString(b)
}

// Open is the token sealed as sealed by Seal(id, key, token); ok is false
// when sealed is not of Seal's form.
func Open(id, key, sealed string) (token string, ok bool) {
	b, err := hex.DecodeString(strings.TrimPrefix(sealed, "sealed:"))
	if err != nil || !strings.HasPrefix(sealed, "sealed:") {
		return "", false
	}
	pad := tokenPad(id, key, len(b))
	for i := range b {
		b[i] ^= pad[i]
	}
	return string(b), true
}
