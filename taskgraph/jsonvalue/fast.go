package jsonvalue

import "bytes"

// fastCheck is Check's path for the values it accepts: one pass over raw
// that validates and compacts at once, without encoding/json's decoder
// (which allocated per token and took a few per cent of the CPU of a
// store's claim+complete cycle, judging the result alone). It answers ok
// only when Check's rules certainly hold, and then out is exactly what
// Check returns (json.Compact's output); anything else (any error, a key
// with an escape, which the decoder compares unescaped, a number that may
// overflow, nesting at the bound) answers false, and Check's full path
// decides and words the error. raw is valid UTF-8 (Check tested it).
func fastCheck(raw []byte, max, maxDepth int, wantObject bool) (out []byte, ok bool) {
	p := fastParser{raw: raw, maxDepth: maxDepth, out: make([]byte, 0, min(len(raw), max+1))}
	p.space()
	if p.i >= len(raw) || (wantObject && raw[p.i] != '{') {
		return nil, false
	}
	if !p.value(0) {
		return nil, false
	}
	p.space()
	if p.i != len(raw) || len(p.out) > max {
		return nil, false
	}
	return p.out, true
}

// fastParser is fastCheck's state: raw read from i, the compacted value
// written to out.
type fastParser struct {
	raw      []byte
	i        int
	maxDepth int
	out      []byte
}

func (p *fastParser) space() {
	for p.i < len(p.raw) {
		switch p.raw[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value reads one value at depth (that of the value's container).
func (p *fastParser) value(depth int) bool {
	if p.i >= len(p.raw) {
		return false
	}
	switch c := p.raw[p.i]; {
	case c == '{':
		return depth+1 <= p.maxDepth && p.object(depth+1)
	case c == '[':
		return depth+1 <= p.maxDepth && p.array(depth+1)
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	}
	return false
}

func (p *fastParser) literal(lit string) bool {
	if !bytes.HasPrefix(p.raw[p.i:], []byte(lit)) {
		return false
	}
	p.out = append(p.out, lit...)
	p.i += len(lit)
	return true
}

// object reads an object whose members are at depth.
func (p *fastParser) object(depth int) bool {
	if p.open('}') {
		return true
	}
	// The keys seen, unescaped (a key with an escape goes to the full
	// path): a short list is searched, a long one indexed.
	var keys [][]byte
	var index map[string]struct{}
	for {
		if p.i >= len(p.raw) || p.raw[p.i] != '"' {
			return false
		}
		key, ok := p.str()
		if !ok || bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		key = key[1 : len(key)-1]
		switch {
		case index != nil:
			if _, dup := index[string(key)]; dup {
				return false
			}
			index[string(key)] = struct{}{}
		default:
			for _, k := range keys {
				if bytes.Equal(k, key) {
					return false
				}
			}
			keys = append(keys, key)
			if len(keys) == 16 {
				index = make(map[string]struct{}, 32)
				for _, k := range keys {
					index[string(k)] = struct{}{}
				}
			}
		}
		p.space()
		if p.i >= len(p.raw) || p.raw[p.i] != ':' {
			return false
		}
		p.out = append(p.out, ':')
		p.i++
		p.space()
		if !p.value(depth) {
			return false
		}
		if done, ok := p.next('}'); done || !ok {
			return ok
		}
	}
}

// array reads an array whose elements are at depth.
func (p *fastParser) array(depth int) bool {
	if p.open(']') {
		return true
	}
	for {
		if !p.value(depth) {
			return false
		}
		if done, ok := p.next(']'); done || !ok {
			return ok
		}
	}
}

// open reads a container's opening byte (at p.i) and the space after it,
// and its closing byte too when the container is empty (true).
func (p *fastParser) open(closing byte) (empty bool) {
	p.out = append(p.out, p.raw[p.i])
	p.i++
	p.space()
	if p.i < len(p.raw) && p.raw[p.i] == closing {
		p.out = append(p.out, closing)
		p.i++
		return true
	}
	return false
}

// next reads what follows a member or an element: a comma (and the space
// after it: not done, ok), the container's closing byte (done, ok), or
// anything else (not ok).
func (p *fastParser) next(closing byte) (done, ok bool) {
	p.space()
	if p.i >= len(p.raw) {
		return false, false
	}
	switch c := p.raw[p.i]; c {
	case ',':
		p.out = append(p.out, ',')
		p.i++
		p.space()
		return false, true
	case closing:
		p.out = append(p.out, closing)
		p.i++
		return true, true
	}
	return false, false
}

// str reads a string and returns it as written, quotes included.
func (p *fastParser) str() ([]byte, bool) {
	start := p.i
	p.i++ // the opening quote
	for p.i < len(p.raw) {
		c := p.raw[p.i]
		switch {
		case c == '"':
			p.i++
			s := p.raw[start:p.i]
			p.out = append(p.out, s...)
			return s, true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if p.i+1 >= len(p.raw) {
				return nil, false
			}
			switch p.raw[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.raw) {
					return nil, false
				}
				for _, h := range p.raw[p.i+2 : p.i+6] {
					if !isHex(h) {
						return nil, false
					}
				}
				p.i += 6
			default:
				return nil, false
			}
		default:
			p.i++
		}
	}
	return nil, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number reads a number of JSON's grammar. One that may be beyond float64
// range goes to the full path: its integer part longer than 200 digits, or
// its exponent three digits or more (below that, its size is under 1e300).
func (p *fastParser) number() bool {
	start := p.i
	if p.raw[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.raw) && p.raw[p.i] >= '0' && p.raw[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i >= len(p.raw) {
		return false
	}
	var n int
	if p.raw[p.i] == '0' {
		p.i++
		n = 1
	} else if n = digits(); n == 0 {
		return false
	}
	if n > 200 {
		return false
	}
	if p.i < len(p.raw) && p.raw[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if p.i < len(p.raw) && (p.raw[p.i] == 'e' || p.raw[p.i] == 'E') {
		p.i++
		if p.i < len(p.raw) && (p.raw[p.i] == '+' || p.raw[p.i] == '-') {
			p.i++
		}
		if e := digits(); e == 0 || e >= 3 {
			return false
		}
	}
	p.out = append(p.out, p.raw[start:p.i]...)
	return true
}
