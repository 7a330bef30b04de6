package jcs

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// appendStringByRune is AppendString written one character at a time, the
// reference the copying version must agree with.
func appendStringByRune(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
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
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// AppendString agrees with the character-by-character reference on strings of
// plain text, escapes, multi-byte and invalid UTF-8 in any mix.
func TestAppendStringMatchesReference(t *testing.T) {
	pieces := []string{"a", "plain text ", `"`, `\`, "\b", "\t", "\n", "\f", "\r", "\x00", "\x1f", "\x7f", "é", "\u2028", "😀", "\xff", "\xe2\x82", "\xed\xa0\x80", "<&>"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		s := ""
		for n := rng.IntN(8); n > 0; n-- {
			s += pieces[rng.IntN(len(pieces))]
		}
		if got, want := string(AppendString([]byte("x"), s)), string(appendStringByRune([]byte("x"), s)); got != want {
			t.Fatalf("AppendString(%q) = %q, want %q", s, got, want)
		}
	}
}
