package liveview

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
)

// How a browser gets into the live view when the server authenticates: a
// browser cannot send a bearer header, so the operator's CLI (ui link)
// mints a one-time login code with an authenticated POST to
// UILoginCodesPath, and prints a link to UILoginPath with it. Opening the
// link exchanges the code for a random session id in an HttpOnly,
// SameSite=Strict cookie limited to Path=/ui. The server keeps only the
// SHA-256 of codes and session ids, each bound to the principal that minted
// the code; the principal is resolved against the live table at each
// request, so a reload that removes or narrows it applies at once. A code
// works once and for UILoginCodeTTL; a session lasts UISessionTTL.
const (
	// UILoginCodeTTL is how long a login code stays valid (it works once).
	UILoginCodeTTL = time.Minute
	// UISessionTTL is how long a view session lasts after login.
	UISessionTTL = 12 * time.Hour
	// uiMaxCodes and uiMaxSessions bound what the server keeps, and
	// uiMaxCodesEach and uiMaxSessionsEach what one principal may hold: at
	// its own bound a principal's entry closest to its expiry goes, and at
	// the server's bound one of the principal holding the most, so minting
	// logins never evicts another operator's session while the minter holds
	// as many.
	uiMaxCodes        = 64
	uiMaxSessions     = 256
	uiMaxCodesEach    = 8
	uiMaxSessionsEach = 32
	uiSecretBytes     = 32
)

type uiGrant struct {
	principal string // "" without authentication
	expires   time.Time
	// csrf is a session's anti-forgery token (none for a login code): a
	// random secret of its own, bound to the session by living in its
	// entry, that the page sends back in UICSRFHeader with every decision.
	csrf string
}

// uiLogins holds the outstanding login codes and the live sessions, by the
// SHA-256 of their secret.
type uiLogins struct {
	mu       sync.Mutex
	codes    map[[sha256.Size]byte]uiGrant
	sessions map[[sha256.Size]byte]uiGrant
}

func newUILogins() *uiLogins {
	return &uiLogins{codes: map[[sha256.Size]byte]uiGrant{}, sessions: map[[sha256.Size]byte]uiGrant{}}
}

func newUISecret() (string, [sha256.Size]byte, error) {
	b := make([]byte, uiSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", [sha256.Size]byte{}, err
	}
	s := base64.RawURLEncoding.EncodeToString(b)
	return s, sha256.Sum256([]byte(s)), nil
}

// putBounded adds g under d, first dropping expired entries; then, when
// g's principal already holds each entries, the one of them closest to its
// expiry; then, at limit, the entry closest to its expiry of the principal
// holding the most entries (g's own on a tie). The caller holds mu.
func putBounded(m map[[sha256.Size]byte]uiGrant, d [sha256.Size]byte, g uiGrant, limit, each int, now time.Time) {
	held := map[string]int{}
	for k, v := range m {
		if !now.Before(v.expires) {
			delete(m, k)
			continue
		}
		held[v.principal]++
	}
	evict := func(who string) {
		var victim [sha256.Size]byte
		first := true
		var soonest time.Time
		for k, v := range m {
			if v.principal == who && (first || v.expires.Before(soonest)) {
				victim, soonest, first = k, v.expires, false
			}
		}
		if !first {
			delete(m, victim)
			held[who]--
		}
	}
	for held[g.principal] >= each {
		evict(g.principal)
	}
	for len(m) >= limit {
		who := g.principal
		for p, n := range held {
			if n > held[who] {
				who = p
			}
		}
		evict(who)
	}
	m[d] = g
}

// mint returns a new one-time login code for principal.
func (l *uiLogins) mint(principal string, now time.Time) (string, error) {
	code, d, err := newUISecret()
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	putBounded(l.codes, d, uiGrant{principal: principal, expires: now.Add(UILoginCodeTTL)}, uiMaxCodes, uiMaxCodesEach, now)
	return code, nil
}

// redeem consumes code and, if it was valid, starts a session for its
// principal, returning the session id.
func (l *uiLogins) redeem(code string, now time.Time) (string, bool, error) {
	if len(code) == 0 || len(code) > 128 {
		return "", false, nil
	}
	d := sha256.Sum256([]byte(code))
	l.mu.Lock()
	g, ok := l.codes[d]
	delete(l.codes, d)
	l.mu.Unlock()
	if !ok || !now.Before(g.expires) {
		return "", false, nil
	}
	sid, sd, err := newUISecret()
	if err != nil {
		return "", false, err
	}
	csrf, _, err := newUISecret()
	if err != nil {
		return "", false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	putBounded(l.sessions, sd, uiGrant{principal: g.principal, expires: now.Add(UISessionTTL), csrf: csrf}, uiMaxSessions, uiMaxSessionsEach, now)
	return sid, true, nil
}

// session returns the grant of the request's session cookie: its
// principal and its anti-forgery token.
func (l *uiLogins) session(r *http.Request, now time.Time) (uiGrant, bool) {
	c, err := r.Cookie(UICookieName)
	if err != nil || len(c.Value) == 0 || len(c.Value) > 128 {
		return uiGrant{}, false
	}
	d := sha256.Sum256([]byte(c.Value))
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.sessions[d]
	if !ok {
		return uiGrant{}, false
	}
	if !now.Before(g.expires) {
		delete(l.sessions, d)
		return uiGrant{}, false
	}
	return g, true
}

// end forgets the request's session, if any.
func (l *uiLogins) end(r *http.Request) {
	c, err := r.Cookie(UICookieName)
	if err != nil || len(c.Value) == 0 || len(c.Value) > 128 {
		return
	}
	d := sha256.Sum256([]byte(c.Value))
	l.mu.Lock()
	delete(l.sessions, d)
	l.mu.Unlock()
}

// serveLogout ends the session of the request's cookie and clears the
// cookie. It must be a POST (a SameSite=Strict cookie and the Origin check
// keep other sites from sending it).
func (u *Handler) serveLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed: POST to log out", http.StatusMethodNotAllowed)
		return
	}
	u.login.end(r)
	http.SetCookie(w, &http.Cookie{Name: UICookieName, Value: "", Path: "/ui", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

// UILoginCode is the answer of a POST to UILoginCodesPath.
type UILoginCode struct {
	// Code is the one-time login code.
	Code string `json:"code"`
	// Path is the login link's path and query (append it to the server's URL).
	Path string `json:"path"`
	// ExpiresInS is the code's validity in seconds.
	ExpiresInS int `json:"expires_in_s"`
}

// serveLoginCode mints a login code for the bearer token's principal. A
// session cookie cannot mint one: only a token can.
func (u *Handler) serveLoginCode(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed: POST with your bearer token to mint a login code", http.StatusMethodNotAllowed)
		return
	}
	name := ""
	if u.cfg.Auth != nil {
		p, why := u.cfg.Authenticate(r)
		if why != "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="graph-engineering-mcp"`)
			u.refuse(w, r, http.StatusUnauthorized, why)
			return
		}
		if !p.HasRole(principal.RoleObserve) {
			u.refuse(w, r, http.StatusForbidden, principal.MissingRole(p, "the live view", []string{principal.RoleObserve}).Error())
			return
		}
		name = p.Name
	}
	next := r.URL.Query().Get("next")
	if next != "" && !safeUINext(next) {
		http.Error(w, "invalid next: must be a path under /ui/ (for example /ui/workflows/ID)", http.StatusBadRequest)
		return
	}
	code, err := u.login.mint(name, u.store.Clock().Now())
	if err != nil {
		http.Error(w, "internal error: no randomness", http.StatusInternalServerError)
		return
	}
	q := url.Values{"code": {code}}
	if next != "" {
		q.Set("next", next)
	}
	writeUIJSON(w, r, http.StatusOK, UILoginCode{Code: code, Path: UILoginPath + "?" + q.Encode(), ExpiresInS: int(UILoginCodeTTL / time.Second)})
}

// safeUINext reports whether next is a plain path under /ui/ (no scheme,
// host, backslash or dot segment), so a login link cannot redirect away.
// The checks hold for next as sent and once percent-decoded: a browser
// reads a segment %2e%2e as "..", so /ui/%2e%2e/mcp would leave /ui/.
func safeUINext(next string) bool {
	decoded, err := url.PathUnescape(next)
	if err != nil || len(next) > 512 {
		return false
	}
	for _, p := range []string{next, decoded} {
		if !strings.HasPrefix(p, UIPath) || strings.ContainsAny(p, "\\?#") || strings.Contains(p, "//") {
			return false
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == "." || seg == ".." {
				return false
			}
		}
	}
	u, err := url.Parse(next)
	return err == nil && u.Scheme == "" && u.Host == ""
}

// serveLogin exchanges a login code for the session cookie, then sends the
// browser on to the view.
func (u *Handler) serveLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	sid, ok, err := u.login.redeem(r.URL.Query().Get("code"), u.store.Clock().Now())
	if err != nil {
		http.Error(w, "internal error: no randomness", http.StatusInternalServerError)
		return
	}
	if !ok {
		u.refuse(w, r, http.StatusUnauthorized, "unauthorized: this login link is unknown, used or expired (a link works once, for a minute); run graph-engineering-mcp ui link again")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: UICookieName, Value: sid, Path: "/ui", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(UISessionTTL / time.Second)})
	next := r.URL.Query().Get("next")
	if next == "" || !safeUINext(next) {
		next = UIPath
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}
