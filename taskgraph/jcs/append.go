package jcs

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// ErrUnsupported matches the error of Append for a value it cannot write
// exactly: a type outside its list, or an integer beyond ±2^53.
var ErrUnsupported = errors.New("value not supported by the canonical JSON encoder")

// AppendString appends s as an RFC 8785 string (§3.2.2.2): only '"', '\\'
// and the control characters below U+0020 are escaped (the two-character
// forms where JSON has them, else \u00xx in lowercase hexadecimal);
// everything else, '/' and non-ASCII included, is written as itself.
// Invalid UTF-8 becomes U+FFFD, so the output is always valid I-JSON.
func AppendString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	start := 0 // s[start:i] is copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || n != 1 {
				i += n
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendInt appends n as RFC 8785 writes an integer (its decimal digits),
// refusing one beyond ±2^53, which a double does not hold exactly.
func AppendInt(b []byte, n int64) ([]byte, error) {
	if n > 1<<53 || n < -(1<<53) {
		return nil, fmt.Errorf("%w: integer %d is beyond what RFC 8785 represents exactly (±2^53)", ErrUnsupported, n)
	}
	return strconv.AppendInt(b, n, 10), nil
}

// Append appends v in RFC 8785 form without a round trip through
// encoding/json: the encoder of values built in code (the store's event
// details, states and export lines). It takes nil, string, bool, int,
// int64, []string, []any, map[string]any (members in the UTF-16 order of
// their names, as Canonicalize sorts them) and json.RawMessage, which must
// be canonical already and is copied as it is. Anything else, and an
// integer beyond ±2^53, is an error matching ErrUnsupported. Its output is
// what Canonicalize makes of the same value marshalled by encoding/json.
func Append(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return AppendInt(b, int64(x))
	case int64:
		return AppendInt(b, x)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = Append(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case []string:
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, s)
		}
		return append(b, ']'), nil
	case json.RawMessage:
		return append(b, x...), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, CompareKeys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = Append(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("%w: %T", ErrUnsupported, v)
}

// IsCanonical reports whether s is exactly the RFC 8785 form of the JSON
// value it holds, and if not, why: the fast recogniser first
// (IsCanonicalFastString), then Canonicalize.
func IsCanonical(s string) (bool, error) {
	if IsCanonicalFastString(s) {
		return true, nil
	}
	c, err := Canonicalize([]byte(s))
	if err != nil {
		return false, err
	}
	return string(c) == s, nil
}
