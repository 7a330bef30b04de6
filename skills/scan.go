package skills

import (
	"bytes"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// finding is one credential or internal-host hit. It never holds the
// matched secret: only what kind of thing was seen and where.
type finding struct {
	Rule string // RuleCredential or RuleInternalHost
	What string // "a GitHub token", "a URL to internal host db.corp"
	Line int    // 1-based line in the scanned text; 0 when not line-based
}

// secretPattern recognises one family of credentials by shape. When
// needsMixed is set, the captured token (group 1, or the whole match) must
// contain both a letter and a digit, which is what separates real keys
// from prose and placeholders such as "Bearer YOUR_ACCESS_TOKEN".
type secretPattern struct {
	what       string
	re         *regexp.Regexp
	needsMixed bool
}

var secretPatterns = []secretPattern{
	{what: "a private key block", re: regexp.MustCompile(`-----BEGIN[ A-Z0-9]*PRIVATE KEY( BLOCK)?-----`)},
	{what: "an AWS access key ID", re: regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16}\b`)},
	{what: "a GitHub token", re: regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,255}\b`)},
	{what: "a GitHub token", re: regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{30,255}`)},
	{what: "an API secret key (sk-…)", re: regexp.MustCompile(`\b(?:sk|rk)[-_](?:live[-_]|test[-_]|proj-|svcacct-|admin-|ant-(?:api\d\d-)?)?([A-Za-z0-9_-]{20,})`), needsMixed: true},
	{what: "a Google API key", re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`)},
	{what: "a Slack token", re: regexp.MustCompile(`\bxox[abposr]-([A-Za-z0-9-]{10,})`), needsMixed: true},
	{what: "a Slack webhook URL", re: regexp.MustCompile(`hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+`)},
	{what: "a JSON Web Token", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`)},
	{what: "a bearer token", re: regexp.MustCompile(`(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{20,}=*)`), needsMixed: true},
}

// assignmentRe finds `<key> = value` and `<key>: value` where the key ends
// in a secret-bearing word (password, secret, token, api_key, ...). Group 1
// is the key, groups 2/3 a double/single-quoted value, group 4 a bare one.
var assignmentRe = regexp.MustCompile(`(?i)\b((?:[a-z0-9]+[_.-])*(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key))\b["']?[ \t]*(?::=|=|:)[ \t]*(?:"([^"\r\n]*)"|'([^'\r\n]*)'|([^\s"'` + "`" + `,;]+))`)

// placeholderWords are values that name a type or stand in for a secret.
var placeholderWords = map[string]bool{
	"null": true, "none": true, "nil": true, "true": true, "false": true, "undefined": true,
	"string": true, "str": true, "bytes": true, "int": true, "integer": true, "number": true,
	"bool": true, "boolean": true, "required": true, "optional": true, "redacted": true,
	"changeme": true, "example": true, "secret": true, "password": true, "token": true,
}

var (
	dottedIdentRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$`)
	envNameRe     = regexp.MustCompile(`^[A-Z]+(_[A-Z0-9]+)*$`)
)

// urlRe finds scheme URLs; group 1 is the scheme, group 2 the authority.
var urlRe = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]{1,15})://([^\s/?#"'<>()\[\]{}|\\` + "`" + `]*(?:\[[0-9a-f:.%a-z]+\][^\s/?#"'<>()\[\]{}|\\` + "`" + `]*)?)`)

// hostPortRe finds bare host:port pairs with a literal loopback name or IP.
var hostPortRe = regexp.MustCompile(`(?i)(?:^|[^A-Za-z0-9.:-])(localhost|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:.]+\]):\d{2,5}\b`)

// internalSuffixes are DNS suffixes that only resolve inside a network.
var internalSuffixes = []string{".internal", ".local", ".corp", ".lan", ".localhost", ".home.arpa"}

// metadataEndpoints are cloud instance-metadata addresses that fall
// outside the private and link-local ranges.
var metadataEndpoints = map[netip.Addr]bool{
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
}

// scanText returns the first credential and the first internal-host
// finding in b, in that order of importance; nil when b is clean.
func scanText(b []byte) *finding {
	if f := findCredential(b); f != nil {
		return f
	}
	return findInternalHost(b)
}

// findCredential reports the earliest-listed kind of credential in b.
func findCredential(b []byte) *finding {
	for _, p := range secretPatterns {
		for _, m := range p.re.FindAllSubmatchIndex(b, -1) {
			tok := b[m[0]:m[1]]
			if p.needsMixed && len(m) >= 4 && m[2] >= 0 {
				tok = b[m[2]:m[3]]
			}
			if p.needsMixed && !hasLetterAndDigit(string(tok)) {
				continue
			}
			return &finding{Rule: RuleCredential, What: p.what, Line: lineAt(b, m[0])}
		}
	}
	for _, m := range assignmentRe.FindAllSubmatchIndex(b, -1) {
		var val string
		quoted := true
		switch {
		case m[4] >= 0:
			val = string(b[m[4]:m[5]])
		case m[6] >= 0:
			val = string(b[m[6]:m[7]])
		case m[8] >= 0:
			val = string(b[m[8]:m[9]])
			quoted = false
		}
		if looksLikeSecretValue(val, quoted) {
			key := string(b[m[2]:m[3]])
			return &finding{Rule: RuleCredential, What: "a literal value assigned to " + strconv.Quote(key), Line: lineAt(b, m[0])}
		}
	}
	for _, m := range urlRe.FindAllSubmatchIndex(b, -1) {
		scheme, authority := string(b[m[2]:m[3]]), string(b[m[4]:m[5]])
		if strings.EqualFold(scheme, "skill") {
			continue
		}
		at := strings.LastIndexByte(authority, '@')
		if at < 0 {
			continue
		}
		if _, pw, ok := strings.Cut(authority[:at], ":"); ok && !isPlaceholder(pw) {
			return &finding{Rule: RuleCredential, What: "a URL with an embedded password", Line: lineAt(b, m[0])}
		}
	}
	return nil
}

// looksLikeSecretValue keeps false positives low: documentation that says
// "token: a string" or "password: <your password>" or code that assigns a
// variable is not a secret; "password: hunter2" and quoted mixed-class
// strings are.
func looksLikeSecretValue(v string, quoted bool) bool {
	if isPlaceholder(v) || strings.Contains(v, "://") || strings.Contains(v, "(") ||
		dottedIdentRe.MatchString(v) || envNameRe.MatchString(v) {
		return false
	}
	letterDigit := len(v) >= 6 && hasLetterAndDigit(v)
	classes, symbol := charClasses(v)
	if quoted {
		return letterDigit || len(v) >= 8 && classes >= 2
	}
	return letterDigit || len(v) >= 8 && classes >= 2 && symbol
}

// isPlaceholder reports values that stand in for a secret rather than being one.
func isPlaceholder(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" || placeholderWords[strings.ToLower(v)] {
		return true
	}
	for _, p := range []string{"$", "{{", "<", "%", "[", "*", "…", "...", "#", "!", "&", "|", ">", "="} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	if first, _ := utf8.DecodeRuneInString(v); strings.Trim(v, string(first)) == "" { // "xxxxxxxx", "00000000"
		return true
	}
	low := strings.ToLower(v)
	for _, p := range []string{"your", "my-", "my_", "example", "placeholder", "dummy", "fake"} {
		if strings.HasPrefix(low, p) {
			return true
		}
	}
	return false
}

func hasLetterAndDigit(s string) bool {
	var letter, digit bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letter = true
		}
	}
	return letter && digit
}

// charClasses counts lower, upper, digit and symbol classes in s; '-', '_'
// and '.' join words and do not count as symbols.
func charClasses(s string) (n int, symbol bool) {
	var lower, upper, digit bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digit = true
		case c == '-' || c == '_' || c == '.':
		default:
			symbol = true
		}
	}
	for _, b := range []bool{lower, upper, digit, symbol} {
		if b {
			n++
		}
	}
	return n, symbol
}

// findInternalHost reports the first URL or host:port in b that points at
// an internal host.
func findInternalHost(b []byte) *finding {
	for _, m := range urlRe.FindAllSubmatchIndex(b, -1) {
		scheme, authority := string(b[m[2]:m[3]]), string(b[m[4]:m[5]])
		if strings.EqualFold(scheme, "skill") {
			continue // skill:// authorities are names, not hosts
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			authority = authority[at+1:]
		}
		if host := hostOf(authority); host != "" {
			if why := internalHost(host); why != "" {
				return &finding{Rule: RuleInternalHost, What: "a URL to " + why, Line: lineAt(b, m[0])}
			}
		}
	}
	for _, m := range hostPortRe.FindAllSubmatchIndex(b, -1) {
		host := strings.Trim(string(b[m[2]:m[3]]), "[]")
		if why := internalHost(host); why != "" {
			return &finding{Rule: RuleInternalHost, What: "an address of " + why, Line: lineAt(b, m[2])}
		}
	}
	return nil
}

// hostOf returns the host of a URL authority (no userinfo), without port
// or IPv6 brackets, lowercased.
func hostOf(authority string) string {
	if strings.HasPrefix(authority, "[") {
		if end := strings.IndexByte(authority, ']'); end > 0 {
			return strings.ToLower(authority[1:end])
		}
		return ""
	}
	if i := strings.IndexByte(authority, ':'); i >= 0 {
		authority = authority[:i]
	}
	return strings.ToLower(authority)
}

// internalHost describes why host is internal, or returns "".
func internalHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return ""
	}
	if host == "localhost" {
		return "loopback host localhost"
	}
	for _, s := range internalSuffixes {
		if strings.HasSuffix(host, s) {
			return "internal host " + host
		}
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // IPv6 zone, "fe80::1%25eth0"
		host = host[:i]
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		a, ok := parseLegacyIPv4(host)
		if !ok {
			return ""
		}
		addr = a
	}
	addr = addr.Unmap()
	switch {
	case addr.IsLoopback():
		return "loopback address " + addr.String()
	case addr.IsUnspecified():
		return "unspecified address " + addr.String()
	case addr.IsPrivate():
		return "private address " + addr.String()
	case addr.IsLinkLocalUnicast():
		return "link-local address " + addr.String()
	case metadataEndpoints[addr]:
		return "cloud metadata endpoint " + addr.String()
	}
	return ""
}

// parseLegacyIPv4 reads the numeric host forms inet_aton accepts and URL
// parsers still honour ("2130706433", "0x7f.1", "0177.0.0.1"), which
// netip rejects but which reach loopback all the same.
func parseLegacyIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		if p == "" {
			return netip.Addr{}, false
		}
		base := 10
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, p = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	last := len(nums) - 1
	for i := 0; i < last; i++ {
		if nums[i] > 0xff {
			return netip.Addr{}, false
		}
		v |= nums[i] << (8 * (3 - i))
	}
	if nums[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	v |= nums[last]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// lineAt returns the 1-based line number of offset off in b.
func lineAt(b []byte, off int) int { return bytes.Count(b[:off], []byte("\n")) + 1 }

// scanValues applies the scanners to every key and string in a frontmatter
// value, after YAML escapes are decoded, so "\x41KIA…" cannot hide a key.
func scanValues(v any) *finding {
	switch t := v.(type) {
	case string:
		if f := scanText([]byte(t)); f != nil {
			f.Line = 0
			return f
		}
	case []any:
		for _, e := range t {
			if f := scanValues(e); f != nil {
				return f
			}
		}
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if f := scanValues(k); f != nil {
				return f
			}
			if f := scanValues(t[k]); f != nil {
				return f
			}
		}
	}
	return nil
}
