// Package jsonnum gives the exact value of a JSON number literal. It is the
// fuzz tests' oracle (FuzzStdio in mcpadapter, FuzzDecodeArgs in
// mcpadapter/tools): written apart from the wire layer and the argument
// decoder it judges, with math/big, so that it cannot share their mistakes.
// Nothing in the server imports it.
package jsonnum

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// Pattern is RFC 8259's grammar of a number, as a regular expression.
var Pattern = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// Exact is the exact value of a JSON number literal. ok is false if lit is
// not a JSON number or its exponent is too large to expand cheaply (such a
// number is far outside every bound unless it is zero).
func Exact(lit string) (r *big.Rat, ok bool) {
	if !Pattern.MatchString(lit) {
		return nil, false
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		if strings.Trim(lit[:i], "-0.") == "" {
			return new(big.Rat), true // zero, whatever the exponent
		}
		e, err := strconv.Atoi(lit[i+1:])
		if err != nil || e > len(lit)+400 || e < -len(lit)-400 {
			return nil, false
		}
	}
	return new(big.Rat).SetString(lit)
}
