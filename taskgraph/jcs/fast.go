package jcs

import "unicode/utf8"

// IsCanonicalFast reports whether b is RFC 8785 canonical JSON in the
// restricted form the store writes: no white space, integers without
// leading zeros (below 2^53 in magnitude: at most 15 digits here, else it
// answers false), strings with only the escapes RFC 8785 uses, valid
// UTF-8, and object members in strictly increasing order of ASCII keys
// without escapes. False means "not shown canonical": callers then decide
// with IsCanonical, which is exact but slower.
func IsCanonicalFast(b []byte) bool { return IsCanonicalFastString(string(b)) }

// IsCanonicalFastString is IsCanonicalFast of the text s, for values read
// as strings (audit verify), without copying them.
func IsCanonicalFastString(s string) bool {
	p := canonScanner{b: s}
	return p.value(0) && p.i == len(s)
}

type canonScanner struct {
	b string
	i int
}

func (p *canonScanner) value(depth int) bool {
	if p.i >= len(p.b) || depth > 32 {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		p.i++
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return true
		}
		for {
			if !p.value(depth + 1) {
				return false
			}
			if p.i >= len(p.b) {
				return false
			}
			if p.b[p.i] == ']' {
				p.i++
				return true
			}
			if p.b[p.i] != ',' {
				return false
			}
			p.i++
		}
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	}
	return false
}

func (p *canonScanner) lit(w string) bool {
	if len(p.b)-p.i < len(w) || string(p.b[p.i:p.i+len(w)]) != w {
		return false
	}
	p.i += len(w)
	return true
}

func (p *canonScanner) number() bool {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	d := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - d
	switch {
	case n == 0 || n > 15:
		return false
	case n > 1 && p.b[d] == '0':
		return false
	case n == 1 && p.b[d] == '0' && d > start: // -0
		return false
	}
	return true
}

// str scans a string; simple is true when it has no escape and is ASCII.
func (p *canonScanner) str() (simple, ok bool) {
	p.i++ // '"'
	simple = true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return simple, true
		case c < 0x20:
			return false, false
		case c == '\\':
			simple = false
			if p.i+1 >= len(p.b) {
				return false, false
			}
			switch p.b[p.i+1] {
			case '"', '\\', 'b', 't', 'n', 'f', 'r':
				p.i += 2
			case 'u':
				// Only control characters without a short form, in lower-case hex.
				if p.i+6 > len(p.b) || p.b[p.i+2] != '0' || p.b[p.i+3] != '0' {
					return false, false
				}
				h, l := p.b[p.i+4], p.b[p.i+5]
				if h != '0' && h != '1' {
					return false, false
				}
				if !(l >= '0' && l <= '9' || l >= 'a' && l <= 'f') {
					return false, false
				}
				v := (h-'0')<<4 | hexVal(l)
				if v == '\b' || v == '\t' || v == '\n' || v == '\f' || v == '\r' {
					return false, false
				}
				p.i += 6
			default:
				return false, false
			}
		case c < utf8.RuneSelf:
			p.i++
		default:
			simple = false
			r, n := utf8.DecodeRuneInString(p.b[p.i:])
			if r == utf8.RuneError && n <= 1 {
				return false, false
			}
			p.i += n
		}
	}
	return false, false
}

func hexVal(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

func (p *canonScanner) object(depth int) bool {
	p.i++ // '{'
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return true
	}
	prev, first := "", true
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return false
		}
		ks := p.i
		simple, ok := p.str()
		if !ok || !simple {
			return false // escaped or non-ASCII keys: let IsCanonical decide
		}
		key := p.b[ks+1 : p.i-1]
		if !first && prev >= key {
			return false
		}
		first = false
		prev = key
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return false
		}
		p.i++
		if !p.value(depth + 1) {
			return false
		}
		if p.i >= len(p.b) {
			return false
		}
		if p.b[p.i] == '}' {
			p.i++
			return true
		}
		if p.b[p.i] != ',' {
			return false
		}
		p.i++
	}
}

// CompactMembers calls fn with the name and the raw text of the value of
// each member of the object s, in their order, when s is an object in the
// compact form IsCanonicalFast reads (names ASCII without escapes, values
// in the restricted canonical form) with its members in any order, a name
// possibly repeated. It returns false, having stopped, as soon as s is not
// such an object or fn returns false. It lets a reader take the fields of
// a stored detail without decoding it.
func CompactMembers(s string, fn func(name, raw string) bool) bool {
	if len(s) < 2 || s[0] != '{' {
		return false
	}
	if s[1] == '}' {
		return len(s) == 2
	}
	p := canonScanner{b: s, i: 1}
	for {
		ks := p.i
		if p.i >= len(s) || s[p.i] != '"' {
			return false
		}
		if simple, ok := p.str(); !ok || !simple {
			return false
		}
		name := s[ks+1 : p.i-1]
		if p.i >= len(s) || s[p.i] != ':' {
			return false
		}
		p.i++
		vs := p.i
		if !p.value(1) || !fn(name, s[vs:p.i]) || p.i >= len(s) {
			return false
		}
		if s[p.i] == '}' {
			return p.i+1 == len(s)
		}
		if s[p.i] != ',' {
			return false
		}
		p.i++
	}
}
