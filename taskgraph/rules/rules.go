package rules

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
)

// ErrInvalid means the input broke a bound or rule; see *ValidationError.
var ErrInvalid = errors.New("invalid input")

// ValidationError names the field that broke a rule. It matches ErrInvalid.
type ValidationError struct {
	Field string
	Rule  string
}

// Error implements error.
func (e *ValidationError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Rule) }

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Invalid returns a *ValidationError for field whose rule is format with
// args.
func Invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

var identifierRE = regexp.MustCompile(limits.IdentifierPattern)

// ValidIdentifier reports whether s matches limits.IdentifierPattern.
func ValidIdentifier(s string) bool { return identifierRE.MatchString(s) }

// CheckIdentifier checks s, the value of field, against
// limits.IdentifierPattern (required).
func CheckIdentifier(field, s string) error {
	if s == "" {
		return Invalid(field, "is required")
	}
	if !identifierRE.MatchString(s) {
		if len(s) > limits.MaxIdentifierLen {
			return Invalid(field, "must be at most %d characters (got %d)", limits.MaxIdentifierLen, len(s))
		}
		return Invalid(field, "must match %s: a letter or digit, then letters, digits, '_', '.', ':' or '-'", limits.IdentifierPattern)
	}
	return nil
}

// TaskIDForm reports whether s has the form of a task id: 26 characters
// of digits and upper-case letters (a ULID in Crockford base32).
func TaskIDForm(s string) bool { return len(s) == 26 && isCrockford(s) }

func isCrockford(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

var tagRE = regexp.MustCompile(limits.TagPattern)

// CanonicalTags validates tags for field (at most max) and returns them
// sorted and deduplicated.
func CanonicalTags(field string, tags []string, max int) ([]string, error) {
	if len(tags) > max {
		return nil, Invalid(field, "must list at most %d tags (got %d)", max, len(tags))
	}
	for _, t := range tags {
		if !tagRE.MatchString(t) {
			return nil, Invalid(field, "tag %q must match %s: a lower-case letter, then up to 63 lower-case letters, digits, '_', '.' or '-'", truncate(t, 80), limits.TagPattern)
		}
	}
	out := slices.Clone(tags)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// SplitTags reads a stored canonical requires.
func SplitTags(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}

// MissingTags returns the tags of requires not among caps (both canonical).
func MissingTags(requires, caps []string) []string {
	var out []string
	for _, t := range requires {
		if _, ok := slices.BinarySearch(caps, t); !ok {
			out = append(out, t)
		}
	}
	return out
}

// SubsetOf reports whether every tag of requires (stored form) is in caps
// (canonical).
func SubsetOf(requires string, caps []string) bool {
	if requires == "" {
		return true
	}
	return len(MissingTags(SplitTags(requires), caps)) == 0
}

// CheckErrorText checks a failure's error text: required, valid UTF-8 of
// at most limits.MaxErrorBytes.
func CheckErrorText(s string) error {
	if s == "" {
		return Invalid("error", "is required: say what went wrong")
	}
	if len(s) > limits.MaxErrorBytes {
		return Invalid("error", "must be at most %d bytes (got %d)", limits.MaxErrorBytes, len(s))
	}
	if !utf8.ValidString(s) {
		return Invalid("error", "must be valid UTF-8")
	}
	return nil
}

// CheckOperator checks a human operator's name and reason: both required,
// valid UTF-8, the name at most limits.MaxIdentifierLen bytes and the
// reason at most limits.MaxReasonBytes.
func CheckOperator(name, reason string) error {
	if name == "" {
		return Invalid("operator", "is required: name who is acting")
	}
	if len(name) > limits.MaxIdentifierLen || !utf8.ValidString(name) {
		return Invalid("operator", "must be valid UTF-8 of at most %d bytes", limits.MaxIdentifierLen)
	}
	if reason == "" {
		return Invalid("reason", "is required: say why, it is recorded in the history")
	}
	if len(reason) > limits.MaxReasonBytes || !utf8.ValidString(reason) {
		return Invalid("reason", "must be valid UTF-8 of at most %d bytes", limits.MaxReasonBytes)
	}
	return nil
}

// CheckClaim checks the claim a holder presents beside its task id: its
// owner (an identifier), its generation (at least 1) and its token
// (required, at most maxToken bytes).
func CheckClaim(owner string, generation int64, token string, maxToken int) error {
	if err := CheckIdentifier("owner", owner); err != nil {
		return err
	}
	if generation < 1 {
		return Invalid("generation", "must be the generation returned by the claim (at least 1, got %d)", generation)
	}
	if token == "" {
		return Invalid("claim_token", "is required: pass the claim_token returned by the claim")
	}
	if len(token) > maxToken {
		return Invalid("claim_token", "must be at most %d bytes (got %d)", maxToken, len(token))
	}
	return nil
}
