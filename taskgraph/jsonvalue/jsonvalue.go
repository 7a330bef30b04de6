// Package jsonvalue holds the rules of the JSON values a task carries
// (payloads and results): Check validates and compacts one, and
// OverflowingNumber finds a number no double-based decoder can read. It is
// a leaf (the standard library only), so the store and the MCP tool
// surface judge JSON by the same rules; package taskgraph applies them
// with its bounds (limits.MaxJSONDepth, the byte limits) and names the
// field in its *ValidationError.
//
// Invariants: a value Check accepts is exactly one well-formed JSON value
// in valid UTF-8 with no duplicate keys and no number beyond float64 range,
// nested at most the given depth, compacted; the cheap pre-scan
// (mayOverflow) never hides an overflowing number from the exact scan.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// Check validates one JSON value: valid UTF-8, well formed, a single
// value (an object when wantObject), no duplicate object keys, nesting at
// most maxDepth, no number beyond float64 range, at most max bytes once
// compacted. It returns the value compacted, or an error whose text is the
// rule broken, worded to follow the field's name ("must be ...", "is ...",
// "has ...").
func Check(raw []byte, max, maxDepth int, wantObject bool) (json.RawMessage, error) {
	// Whitespace does not count against the bound, but a raw input far past
	// it is refused before it is parsed (checkFull).
	if len(raw) <= 4*max && utf8.Valid(raw) {
		if out, ok := fastCheck(raw, max, maxDepth, wantObject); ok {
			return out, nil
		}
	}
	return checkFull(raw, max, maxDepth, wantObject)
}

// checkFull is Check by encoding/json's decoder: the judge of every value
// the fast path (fastCheck) does not accept, and the wording of every
// error.
func checkFull(raw []byte, max, maxDepth int, wantObject bool) (json.RawMessage, error) {
	if len(raw) > 4*max {
		return nil, fmt.Errorf("must be at most %d bytes of JSON (got %d)", max, len(raw))
	}
	if !utf8.Valid(raw) {
		return nil, errors.New("must be valid UTF-8 JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := walkJSON(dec, 0, maxDepth, wantObject); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("must be a single JSON value (found data after it)")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("is not valid JSON: %v", err)
	}
	if buf.Len() > max {
		return nil, fmt.Errorf("must be at most %d bytes of JSON (got %d)", max, buf.Len())
	}
	return json.RawMessage(buf.Bytes()), nil
}

// overflows reports whether the JSON number n is beyond float64 range.
// Such a number is valid JSON and the store would keep it exactly, but a
// worker whose JSON decoder reads numbers as doubles (JavaScript, Python's
// json with floats, Go's encoding/json into any) fails on it after its claim
// has committed, burning an attempt; so payloads and results refuse it.
// Integers beyond 2^53 and numbers that underflow to zero decode (rounded),
// so they are kept.
func overflows(n string) bool {
	f, err := strconv.ParseFloat(n, 64)
	return err != nil && math.IsInf(f, 0)
}

func clipNumber(n string) string {
	if len(n) > 40 {
		return n[:40] + "…"
	}
	return n
}

// mayOverflow is a cheap byte scan that is true whenever raw may hold a
// number beyond float64 range: one with an exponent of three or more digits
// (the largest float64 is about 1.8e308), or with 309 or more digits in a
// row. It may be true for text inside strings too; OverflowingNumber then
// decides exactly. It keeps that exact (and much slower) scan off the path
// of every ordinary request.
func mayOverflow(raw []byte) bool {
	run := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c >= '0' && c <= '9' {
			run++
			if run >= 309 {
				return true
			}
			continue
		}
		if (c == 'e' || c == 'E') && (run > 0 || (i > 0 && raw[i-1] == '.')) {
			j := i + 1
			if j < len(raw) && (raw[j] == '+' || raw[j] == '-') {
				j++
			}
			k := j
			for k < len(raw) && raw[k] >= '0' && raw[k] <= '9' {
				k++
			}
			if k-j >= 3 {
				return true
			}
		}
		run = 0
	}
	return false
}

// OverflowingNumber returns the first number in the JSON value raw that is
// beyond float64 range (see the payload rules), and whether there is one.
// Invalid JSON has none.
func OverflowingNumber(raw []byte) (string, bool) {
	if !mayOverflow(raw) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if n, ok := tok.(json.Number); ok && overflows(string(n)) {
			return string(n), true
		}
	}
}

// walkJSON reads one value from dec, at depth.
func walkJSON(dec *json.Decoder, depth, maxDepth int, wantObject bool) error {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			if depth == 0 {
				return errors.New("is empty; expected a JSON value")
			}
			// The decoder reports a value cut short as a plain EOF.
			return errors.New("is not valid JSON: unexpected end of input")
		}
		return fmt.Errorf("is not valid JSON: %v", err)
	}
	d, isDelim := tok.(json.Delim)
	if wantObject && (!isDelim || d != '{') {
		return errors.New("must be a JSON object")
	}
	if n, ok := tok.(json.Number); ok && overflows(string(n)) {
		return fmt.Errorf("holds the number %s, beyond the range of a 64-bit float (about ±1.8e308), which most JSON decoders cannot read; send such values as strings", clipNumber(string(n)))
	}
	if !isDelim {
		return nil
	}
	if depth+1 > maxDepth {
		return fmt.Errorf("nests deeper than %d levels", maxDepth)
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("is not valid JSON: %v", err)
			}
			k, _ := kt.(string)
			if seen[k] {
				return fmt.Errorf("has the key %q twice in one object", k)
			}
			seen[k] = true
			if err := walkJSON(dec, depth+1, maxDepth, false); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walkJSON(dec, depth+1, maxDepth, false); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // closing delimiter
		return fmt.Errorf("is not valid JSON: %v", err)
	}
	return nil
}
