package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects that Canonicalize
// accepts. Deeper input is rejected rather than recursed into.
const MaxDepth = 256

// ErrInvalidJSON reports input that RFC 8785 cannot canonicalize: malformed
// JSON, invalid UTF-8, a lone surrogate escape, a duplicate object key, a
// number outside the IEEE 754 double range, trailing data, or nesting deeper
// than MaxDepth. The wrapping error names the byte offset and the rule.
var ErrInvalidJSON = errors.New("invalid JSON")

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the single JSON value in raw: no insignificant whitespace, object members
// sorted by the UTF-16 code units of their names, strings with only the
// escapes RFC 8785 §3.2.2.2 requires, and numbers parsed as IEEE 754 doubles
// and written as ECMAScript's Number.prototype.toString writes them.
//
// Numbers are parsed as doubles, as the RFC prescribes: an integer beyond
// 2^53 that a double cannot hold exactly is rounded to the nearest double,
// and a value too small for a double becomes 0. A number too large for a
// double (it would be infinite) is rejected.
//
// The input must be I-JSON in the respects the output depends on: valid
// UTF-8, no escaped lone surrogates, no object with two members of the same
// name (compared after unescaping). Violations are errors matching
// ErrInvalidJSON; leading and trailing whitespace is allowed, anything else
// after the value is not.
func Canonicalize(raw []byte) ([]byte, error) {
	v, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	WriteCanonical(&buf, v)
	return buf.Bytes(), nil
}

// CanonicalizeValue marshals v with encoding/json and returns the RFC 8785
// form of the result. encoding/json's rules apply to the marshalling: struct
// tags name members, and strings holding invalid UTF-8 are coerced to valid
// UTF-8 (each bad byte becomes U+FFFD) before canonicalization sees them.
// Callers hashing strings from untrusted sources validate them first.
func CanonicalizeValue(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: marshal: %w", ErrInvalidJSON, err)
	}
	return Canonicalize(raw)
}

// Kind is the JSON type of a parsed value.
type Kind uint8

// The kinds of Value.
const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

// String names the kind as error messages do.
func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	default:
		return "object"
	}
}

// Value is one parsed JSON value (Parse). Only the fields of its Kind are
// set.
type Value struct {
	Kind    Kind
	Bool    bool
	Number  float64
	Str     string
	Elems   []Value
	Members []Member // sorted by CompareKeys of their names, no name twice
	offset  int      // byte offset of the value's first byte in the input
}

// Member is one object member.
type Member struct {
	Name string
	Val  Value
}

// parser is a strict RFC 8259 recursive-descent parser.
type parser struct {
	data []byte
	pos  int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte offset %d: %s", ErrInvalidJSON, p.pos, fmt.Sprintf(format, args...))
}

// Parse parses exactly one JSON value, surrounded by optional whitespace,
// as Canonicalize reads it (its errors match ErrInvalidJSON), and sorts
// every object's members, rejecting duplicate names: for callers that read
// the value's fields as well as its canonical form (WriteCanonical).
func Parse(raw []byte) (Value, error) {
	p := &parser{data: raw}
	p.skipSpace()
	if p.pos == len(p.data) {
		return Value{}, p.errorf("empty input; expected a JSON value")
	}
	v, err := p.parseValue(0)
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return Value{}, p.errorf("unexpected %s after the JSON value", p.describe())
	}
	return v, nil
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// describe names the input at the current position for an error message.
func (p *parser) describe() string {
	if p.pos >= len(p.data) {
		return "end of input"
	}
	c := p.data[p.pos]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("character %q", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) parseValue(depth int) (Value, error) {
	if p.pos >= len(p.data) {
		return Value{}, p.errorf("unexpected end of input; expected a JSON value")
	}
	start := p.pos
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.parseObject(depth + 1)
	case c == '[':
		return p.parseArray(depth + 1)
	case c == '"':
		s, err := p.parseString()
		return Value{Kind: KindString, Str: s, offset: start}, err
	case c == 't':
		return Value{Kind: KindBool, Bool: true, offset: start}, p.literal("true")
	case c == 'f':
		return Value{Kind: KindBool, Bool: false, offset: start}, p.literal("false")
	case c == 'n':
		return Value{Kind: KindNull, offset: start}, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		f, err := p.parseNumber()
		return Value{Kind: KindNumber, Number: f, offset: start}, err
	default:
		return Value{}, p.errorf("unexpected %s; expected a JSON value", p.describe())
	}
}

func (p *parser) literal(word string) error {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return p.errorf("invalid literal; expected %q", word)
	}
	p.pos += len(word)
	return nil
}

func (p *parser) parseObject(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.errorf("nesting deeper than %d levels", MaxDepth)
	}
	v := Value{Kind: KindObject, offset: p.pos, Members: []Member{}}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.errorf("unexpected %s; expected a member name string", p.describe())
		}
		name, err := p.parseString()
		if err != nil {
			return Value{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.errorf("unexpected %s; expected ':' after member name %q", p.describe(), name)
		}
		p.pos++
		p.skipSpace()
		val, err := p.parseValue(depth)
		if err != nil {
			return Value{}, err
		}
		v.Members = append(v.Members, Member{Name: name, Val: val})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input; expected ',' or '}' in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, sortMembers(v)
		default:
			return Value{}, p.errorf("unexpected %s; expected ',' or '}' in object", p.describe())
		}
	}
}

// sortMembers orders an object's members by the UTF-16 code units of their
// names (RFC 8785 §3.2.3) and rejects a name that occurs twice.
func sortMembers(v Value) error {
	slices.SortStableFunc(v.Members, func(a, b Member) int { return CompareKeys(a.Name, b.Name) })
	for i := 1; i < len(v.Members); i++ {
		if v.Members[i].Name == v.Members[i-1].Name {
			return fmt.Errorf("%w: object at byte offset %d has the member name %q twice (I-JSON forbids duplicate names)",
				ErrInvalidJSON, v.offset, v.Members[i].Name)
		}
	}
	return nil
}

// CompareKeys orders member names as RFC 8785 §3.2.3 does: a and b
// compared as sequences of UTF-16 code units, returning -1, 0 or +1. UTF-8
// byte order is code point order, and UTF-16 order differs from it only
// where a character beyond U+FFFF (written as a surrogate pair,
// 0xD800-0xDBFF first) meets one in U+E000-U+FFFF at the same place: UTF-8
// puts the first after (lead byte 0xF0-0xF4 against 0xEE-0xEF), UTF-16
// before. So the names are compared as bytes, and only that case is turned
// round.
func CompareKeys(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		switch {
		case len(a) == len(b):
			return 0
		case len(a) < len(b):
			return -1
		default:
			return 1
		}
	}
	ca, cb := a[i], b[i]
	// Lead bytes differ only at the start of a character: a continuation
	// byte (0x80-0xBF) here means both characters share their lead byte,
	// and so their UTF-16 length, and byte order holds.
	if supplementary(ca) && bmpHigh(cb) {
		return -1
	}
	if bmpHigh(ca) && supplementary(cb) {
		return 1
	}
	if ca < cb {
		return -1
	}
	return 1
}

// supplementary: c leads a character beyond U+FFFF in UTF-8.
func supplementary(c byte) bool { return c >= 0xF0 && c <= 0xF4 }

// bmpHigh: c leads a character in U+E000-U+FFFF in UTF-8.
func bmpHigh(c byte) bool { return c == 0xEE || c == 0xEF }

func (p *parser) parseArray(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.errorf("nesting deeper than %d levels", MaxDepth)
	}
	v := Value{Kind: KindArray, offset: p.pos, Elems: []Value{}}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		e, err := p.parseValue(depth)
		if err != nil {
			return Value{}, err
		}
		v.Elems = append(v.Elems, e)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input; expected ',' or ']' in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return Value{}, p.errorf("unexpected %s; expected ',' or ']' in array", p.describe())
		}
	}
}

// parseString parses a string starting at the opening quote and returns its
// unescaped content, which is valid UTF-8.
func (p *parser) parseString() (string, error) {
	p.pos++ // opening quote
	var sb strings.Builder
	for {
		if p.pos >= len(p.data) {
			return "", p.errorf("unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return sb.String(), nil
		case c == '\\':
			r, err := p.parseEscape()
			if err != nil {
				return "", err
			}
			sb.WriteRune(r)
		case c < 0x20:
			return "", p.errorf("control character U+%04X in a string must be escaped", c)
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8 byte 0x%02x in a string", c)
			}
			sb.Write(p.data[p.pos : p.pos+size])
			p.pos += size
		}
	}
}

// parseEscape parses one escape sequence starting at the backslash. A
// surrogate pair written as two \u escapes yields one rune; a lone surrogate
// is an error, as it cannot be represented in UTF-8.
func (p *parser) parseEscape() (rune, error) {
	if p.pos+1 >= len(p.data) {
		p.pos = len(p.data)
		return 0, p.errorf("unterminated escape sequence")
	}
	c := p.data[p.pos+1]
	switch c {
	case '"', '\\', '/':
		p.pos += 2
		return rune(c), nil
	case 'b':
		p.pos += 2
		return '\b', nil
	case 'f':
		p.pos += 2
		return '\f', nil
	case 'n':
		p.pos += 2
		return '\n', nil
	case 'r':
		p.pos += 2
		return '\r', nil
	case 't':
		p.pos += 2
		return '\t', nil
	case 'u':
	default:
		p.pos++
		return 0, p.errorf("invalid escape sequence \\%s", p.describe())
	}
	r, err := p.hex4()
	if err != nil {
		return 0, err
	}
	switch {
	case utf16.IsSurrogate(r) && r < 0xdc00: // high surrogate
		if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
			return 0, p.errorf("lone surrogate \\u%04x: a high surrogate must be followed by a \\u escape of a low surrogate", r)
		}
		lo, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if lo < 0xdc00 || lo > 0xdfff {
			return 0, p.errorf("lone surrogate \\u%04x: followed by \\u%04x, which is not a low surrogate", r, lo)
		}
		return utf16.DecodeRune(r, lo), nil
	case utf16.IsSurrogate(r):
		return 0, p.errorf("lone surrogate \\u%04x: a low surrogate must follow a high surrogate", r)
	default:
		return r, nil
	}
}

// hex4 parses \uXXXX at the current position.
func (p *parser) hex4() (rune, error) {
	if p.pos+6 > len(p.data) {
		return 0, p.errorf("truncated \\u escape; expected four hexadecimal digits")
	}
	var r rune
	for _, c := range p.data[p.pos+2 : p.pos+6] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.errorf("invalid \\u escape; expected four hexadecimal digits")
		}
		r = r<<4 | rune(d)
	}
	p.pos += 6
	return r, nil
}

// parseNumber parses an RFC 8259 number as an IEEE 754 double.
func (p *parser) parseNumber() (float64, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case p.pos < len(p.data) && p.data[p.pos] >= '1' && p.data[p.pos] <= '9':
		p.digits()
	default:
		return 0, p.errorf("invalid number: expected a digit")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return 0, p.errorf("invalid number: expected a digit after the decimal point")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return 0, p.errorf("invalid number: expected a digit in the exponent")
		}
	}
	text := string(p.data[start:p.pos])
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		p.pos = start
		return 0, p.errorf("invalid number %s", text)
	}
	if math.IsInf(f, 0) {
		p.pos = start
		return 0, p.errorf("number %s is outside the range of an IEEE 754 double", text)
	}
	return f, nil
}

func (p *parser) digits() int {
	n := 0
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

// WriteCanonical writes v, a value from Parse, in RFC 8785 form. Its object
// members must be in Parse's order (a member may be removed) and its
// numbers finite.
func WriteCanonical(buf *bytes.Buffer, v Value) {
	switch v.Kind {
	case KindNull:
		buf.WriteString("null")
	case KindBool:
		if v.Bool {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case KindNumber:
		buf.WriteString(formatNumber(v.Number))
	case KindString:
		buf.Write(AppendString(buf.AvailableBuffer(), v.Str))
	case KindArray:
		buf.WriteByte('[')
		for i, e := range v.Elems {
			if i > 0 {
				buf.WriteByte(',')
			}
			WriteCanonical(buf, e)
		}
		buf.WriteByte(']')
	case KindObject:
		buf.WriteByte('{')
		for i, m := range v.Members {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(AppendString(buf.AvailableBuffer(), m.Name))
			buf.WriteByte(':')
			WriteCanonical(buf, m.Val)
		}
		buf.WriteByte('}')
	}
}

// formatNumber writes a finite double as ECMAScript's Number::toString does
// (ECMA-262 §6.1.6.1.20, as RFC 8785 §3.2.2.3 requires): the shortest
// decimal digits that round-trip, laid out as an integer when the decimal
// exponent is at most 21, as a plain fraction down to 1e-6, and in
// exponential form with an explicit exponent sign otherwise. Negative zero
// is written as 0.
func formatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	var out []byte
	if f < 0 {
		out = append(out, '-')
		f = -f
	}
	// Shortest round-trip digits in the form d.ddddde±XX.
	e := strconv.AppendFloat(nil, f, 'e', -1, 64)
	mark := bytes.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(string(e[mark+1:]))
	digits := make([]byte, 0, mark)
	for _, c := range e[:mark] {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	k := len(digits) // number of significant digits
	n := exp + 1     // position of the decimal point relative to the digits
	switch {
	case k <= n && n <= 21:
		out = append(out, digits...)
		for range n - k {
			out = append(out, '0')
		}
	case 0 < n && n <= 21:
		out = append(out, digits[:n]...)
		out = append(out, '.')
		out = append(out, digits[n:]...)
	case -6 < n && n <= 0:
		out = append(out, '0', '.')
		for range -n {
			out = append(out, '0')
		}
		out = append(out, digits...)
	default:
		out = append(out, digits[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, digits[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, int64(n-1), 10)
	}
	return string(out)
}
