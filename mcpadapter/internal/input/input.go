// Package input holds the rules by which the MCP adapter reads untrusted
// JSON and echoes it back: numbers read exactly, never through float64;
// objects whose keys are all distinct; echoed text clipped and kept valid
// UTF-8. It is a leaf: the wire layer (request ids), the tool surface
// (arguments) and the transports (claim classification) read input with the
// same rules, so they cannot disagree about what a message says.
//
// # Invariants
//
//   - Int accepts exactly the JSON numbers that denote an integer in the
//     int64 range (1000, 1e3, 1000.0), however they are spelled, and
//     refuses every other number; it never rounds.
//   - Object refuses an object that names a key twice: no reader of this
//     server ever picks one of two values.
//   - Clip never returns more than MaxEcho bytes of the input, and always
//     returns valid UTF-8.
package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxSafeInteger is the largest integer every JSON implementation holds
// exactly (2^53 - 1).
const MaxSafeInteger = 1<<53 - 1

// MaxEcho is how many bytes of a client's input an error message echoes.
const MaxEcho = 64

// Int parses a JSON number that denotes an integer (1000, 1e3, 1000.0)
// exactly, never through float64: a number with any non-zero fraction,
// however small (1e-400, 3.0000000000000000001), is not an integer, and one
// beyond the int64 range is refused rather than rounded.
func Int(v json.RawMessage) (int64, error) {
	s := string(v)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if !json.Valid(v) || len(s) == 0 || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, errors.New("not a number")
	}
	// A valid JSON number: -?int(.frac)?([eE][+-]?exp)?
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	// The value is digits × 10^e.
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, nil // zero, whatever the exponent
	}
	trimmed := strings.TrimRight(digits, "0")
	e := int64(len(digits)-len(trimmed)) - int64(len(frac))
	digits = trimmed
	if exp != "" {
		expNeg := exp[0] == '-'
		exp = strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if len(exp) > 9 {
			// An exponent of ten or more digits: no message holds enough
			// digits to bring such a number back into range.
			if expNeg {
				return 0, errors.New("not an integer")
			}
			return 0, errors.New("out of range")
		}
		x, _ := strconv.ParseInt("0"+exp, 10, 64)
		if expNeg {
			x = -x
		}
		e += x
	}
	if e < 0 {
		return 0, errors.New("not an integer") // digits has no trailing zero
	}
	if int64(len(digits))+e > 19 {
		return 0, errors.New("out of range")
	}
	if neg {
		digits = "-" + digits
	}
	n, err := strconv.ParseInt(digits+strings.Repeat("0", int(e)), 10, 64)
	if err != nil {
		return 0, errors.New("out of range")
	}
	return n, nil
}

// Object decodes a JSON object whose keys are all distinct (keys match
// exactly, as the SDK's decoder matches them); ok is false for anything
// else, a repeated key included.
func Object(raw json.RawMessage) (m map[string]json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	m = map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		m[k] = v
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	return m, true
}

// Clip shortens echoed input for an error message to at most MaxEcho bytes
// (marking the cut), and keeps it valid UTF-8.
func Clip(s string) string {
	if len(s) > MaxEcho {
		cut := MaxEcho
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Quote is Clip in double quotes.
func Quote(s string) string { return `"` + Clip(s) + `"` }

// Cut cuts s to at most n bytes on a rune boundary, marking the cut with
// "…" (which the n bytes do not count).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// LoneSurrogate reports whether the JSON text raw holds, in a string, a
// \u escape of a UTF-16 surrogate that is not one half of a pair (such as
// "\udc00"), and returns the first such escape. Go's decoder turns one into
// U+FFFD, but the raw text is kept where a value is stored as sent: a
// lone surrogate is not a Unicode character, and a reader that decodes it
// faithfully (Python's json) cannot write it out as UTF-8.
func LoneSurrogate(raw []byte) (string, bool) {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '"':
			inString = !inString
		case !inString:
		case c == '\\' && i+1 < len(raw) && raw[i+1] != 'u':
			i++ // an escape other than \u: skip the escaped character
		case c == '\\':
			r, ok := hex4(raw, i+2)
			if !ok {
				i++
				continue
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				// A high surrogate must be followed by an escaped low one.
				if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
					if lo, ok := hex4(raw, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						i += 11
						continue
					}
				}
				return string(raw[i : i+6]), true
			case r >= 0xDC00 && r <= 0xDFFF:
				return string(raw[i : i+6]), true
			}
			i += 5
		}
	}
	return "", false
}

// hex4 reads the four hex digits at raw[i:i+4].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Members calls member, in order, with the key and the raw value of each
// member of obj, which must be valid JSON (json.Valid) and an object; it
// stops at the first error member returns and returns it. A key is
// unescaped as encoding/json decodes a string (invalid UTF-8 becomes
// U+FFFD); a value is the exact bytes of it in obj, without the white
// space around it, as json.Decoder.Decode reads it into a json.RawMessage.
// It reads obj once and allocates only the keys: json.Decoder's tokens
// allocate several times for each member.
func Members(obj []byte, member func(key string, val json.RawMessage) error) error {
	return RawMembers(obj, func(key []byte, val json.RawMessage) error { return member(Key(key), val) })
}

// RawMembers is Members with each key as it is in obj: a JSON string,
// quotes and escapes included (read it with Key or KeyIs). It allocates
// nothing.
func RawMembers(obj []byte, member func(key []byte, val json.RawMessage) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		ks := i
		i = skipString(obj, i)
		key := obj[ks:i]
		i = skipSpace(obj, i)
		i = skipSpace(obj, i+1) // ':'
		vs := i
		i = skipValue(obj, i)
		if err := member(key, json.RawMessage(obj[vs:i])); err != nil {
			return err
		}
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return nil
		}
		i = skipSpace(obj, i+1) // ','
	}
	return nil
}

// Key decodes the JSON string raw (quotes included, valid JSON) as
// encoding/json decodes a string.
func Key(raw []byte) string {
	if inner, ok := plain(raw); ok {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid JSON: cannot fail
	return s
}

// KeyIs reports whether the JSON string raw (quotes included, valid JSON)
// decodes to s, without allocating when raw has no escapes.
func KeyIs(raw []byte, s string) bool {
	if inner, ok := plain(raw); ok {
		return string(inner) == s
	}
	return Key(raw) == s
}

// plain returns the inside of the JSON string raw (quotes included) when
// it has no escape and is valid UTF-8: then it is what raw decodes to,
// byte for byte.
func plain(raw []byte) ([]byte, bool) {
	inner := raw[1 : len(raw)-1]
	return inner, bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the valid JSON value starting at
// b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// String decodes raw, a valid JSON value, as json.Unmarshal decodes it into
// a string (null is "", as Unmarshal leaves the string unset), and reports
// false where Unmarshal would fail (raw is not a string). A string without
// escapes and of valid UTF-8 is taken as is, without Unmarshal's
// allocations.
func String(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", string(raw) == "null"
	}
	if inner, ok := plain(raw); ok {
		return string(inner), true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}
