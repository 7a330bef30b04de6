package liveview

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// The live view's routes (serve --http). Everything under UIPath is the
// operator view: HTML, CSS and one script embedded in the binary, and the
// JSON it polls; it only reads, but for its login routes and an approver's
// gate decisions (UIGatesPath).
const (
	// UIPath is the root of the live workflow view.
	UIPath = "/ui/"
	// UILoginCodesPath mints a one-time login code (POST, bearer token).
	UILoginCodesPath = "/ui/login-codes"
	// UILoginPath exchanges a login code for a session cookie (GET ?code=).
	UILoginPath = "/ui/login"
	// UILogoutPath ends the request's view session (POST).
	UILogoutPath = "/ui/logout"
	// UIRoute is the route label of every view request (logs, metrics).
	UIRoute = "/ui"
	// UICookieName is the session cookie of the live view.
	UICookieName = "graph_engineering_ui"
)

// Bounds of the live view.
const (
	// UIMaxConcurrent bounds the view's requests served at once. They never
	// take one of the MCP concurrency slots (HTTPOptions.MaxConcurrent):
	// the view cannot slow a worker's call down by more than its own reads.
	UIMaxConcurrent = 4
	// UIMaxWorkflows is how many workflows one page of /ui/ lists, the
	// most recently changed first.
	UIMaxWorkflows = 200
	// UIMaxQueryBytes bounds the list's filter (q).
	UIMaxQueryBytes = 256
	// UIMaxPage bounds the list's page number.
	UIMaxPage = 100_000
	// UIMaxEvents bounds the history events a task's detail shows (the
	// latest ones).
	UIMaxEvents = 200
	// uiMaxText bounds each payload, result or event detail shown (bytes).
	uiMaxText = 4096
	// uiAdmissionWait is how long a view request waits for a slot before 503.
	uiAdmissionWait = 2 * time.Second
	// uiReadTimeout bounds the store reads of one view request.
	uiReadTimeout = 10 * time.Second
	// uiPollMS is the polling interval the page uses (it backs off on errors).
	uiPollMS = 1000
	// uiFinishedPollMS is the page's interval once every task has finished.
	uiFinishedPollMS = 15000
)

// uiCSP is the Content-Security-Policy of every view response: nothing
// loads from anywhere but this server, no inline script or style, no frames,
// no forms.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed ui
var uiAssets embed.FS

// Config configures New.
type Config struct {
	// Store is read through its API only.
	Store *taskgraph.Store
	// Auth is the live principal table; nil: no authentication (every
	// workflow is shown, login codes name no principal).
	Auth *principal.Authenticator
	// Authenticate checks a request's Authorization header as the HTTP
	// front does for /mcp: the principal, or the message of its 401. Used
	// only with Auth.
	Authenticate func(*http.Request) (*principal.Principal, string)
	// OnRefuse, if set, counts a refused request by reason (unauthorized,
	// insufficient_scope), for metrics.
	OnRefuse func(reason string)
	// Logger receives failed reads; nil discards them.
	Logger *slog.Logger
	// PageSize is how many workflows one page of the list shows (0:
	// UIMaxWorkflows).
	PageSize int
	// Stop is closed as the server shuts down: every event stream ends
	// (event "shutdown") rather than hold the drain. Nil: never.
	Stop <-chan struct{}
	// MaxStreams bounds the event streams open at once (0: UIMaxStreams).
	MaxStreams int
}

// Handler serves the live view. It reads only through the taskgraph Store
// API; its one write is a gate decision (gate.go), through
// Store.DecideGate.
type Handler struct {
	cfg      Config
	store    *taskgraph.Store
	log      *slog.Logger
	sem      chan struct{}
	login    *uiLogins
	pageSize int
	// builds counts the workflow answers built (not the cheap 304s).
	builds atomic.Int64
	// lapses maps the ETag of a workflow answer to the server time (Unix
	// ms) at which its next lease lapses (0: none), when that answer would
	// show a claim as stuck without any event; bounded by uiMaxETags.
	lapseMu sync.Mutex
	lapses  map[string]int64
	// lapseByVersion maps a workflow version (the ETag's prefix) to the
	// next lapse of the answer last built for it, for the event streams;
	// bounded like lapses.
	lapseByVersion map[string]int64
	push           *pushHub
	stop           <-chan struct{}
}

// uiMaxETags bounds the workflow ETags whose next lapse is remembered; at
// the bound they are all forgotten (a forgotten ETag is answered by a
// rebuild, never by a wrong 304).
const uiMaxETags = 4096

// WorkflowBuilds returns how many workflow answers were built since New:
// an unchanged poll answered 304 from the workflow's version builds none.
func (u *Handler) WorkflowBuilds() int64 { return u.builds.Load() }

// New returns the live view's handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = UIMaxWorkflows
	}
	u := &Handler{cfg: cfg, store: cfg.Store, log: cfg.Logger, sem: make(chan struct{}, UIMaxConcurrent), login: newUILogins(), pageSize: cfg.PageSize, stop: cfg.Stop}
	u.push = newPushHub(u, cfg.MaxStreams)
	return u
}

// IsRoute reports whether path belongs to the live view.
func IsRoute(path string) bool { return path == "/ui" || strings.HasPrefix(path, UIPath) }

// ServeHTTP answers one view request; the HTTP front has checked its Host
// and Origin.
func (u *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", uiCSP)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	path := r.URL.Path
	switch {
	case path == "/ui":
		http.Redirect(w, r, UIPath, http.StatusMovedPermanently)
		return
	case path == UILoginCodesPath:
		u.serveLoginCode(w, r)
		return
	case path == UILoginPath:
		u.serveLogin(w, r)
		return
	case path == UILogoutPath:
		u.serveLogout(w, r)
		return
	case strings.HasPrefix(path, "/ui/assets/"):
		u.serveAsset(w, r, strings.TrimPrefix(path, "/ui/assets/"))
		return
	case strings.HasPrefix(path, UIGatesPath):
		u.serveGate(w, r) // the view's one write (gate.go)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: the live view only reads (but for its login routes and gate decisions)", http.StatusMethodNotAllowed)
		return
	}
	v, status, why := u.viewer(r)
	if status != 0 {
		u.refuse(w, r, status, why)
		return
	}
	switch {
	case path == UIPath:
		u.servePage(w, "index.html")
	case strings.HasPrefix(path, "/ui/workflows/") && strings.HasSuffix(path, "/events"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/ui/workflows/"), "/events")
		if id == "" || strings.Contains(id, "/") {
			http.NotFound(w, r)
			return
		}
		u.serveEvents(w, r, v, id)
	case strings.HasPrefix(path, "/ui/workflows/"):
		id := strings.TrimPrefix(path, "/ui/workflows/")
		if id == "" || strings.Contains(id, "/") {
			http.NotFound(w, r)
			return
		}
		u.servePage(w, "workflow.html")
	case path == UIMePath:
		writeUIJSON(w, r, http.StatusOK, u.me(v))
	case path == "/ui/api/workflows":
		q, page, err := uiListQuery(r)
		if err != nil {
			writeUIJSON(w, r, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		u.withSlot(w, r, func(ctx context.Context) (any, error) { return u.listWorkflows(ctx, v, q, page) })
	case strings.HasPrefix(path, "/ui/api/workflows/"):
		id := strings.TrimPrefix(path, "/ui/api/workflows/")
		u.serveWorkflow(w, r, v, id)
	case strings.HasPrefix(path, "/ui/api/tasks/"):
		id := strings.TrimPrefix(path, "/ui/api/tasks/")
		u.withSlot(w, r, func(ctx context.Context) (any, error) { return u.task(ctx, v, id) })
	default:
		http.NotFound(w, r)
	}
}

// viewer is who a view request acts for: nil principal means every
// workflow (no authentication configured). csrf is the anti-forgery token
// of the session the request came with ("" for a bearer token or without
// authentication).
type viewer struct {
	p    *principal.Principal
	csrf string
}

func (v viewer) allows(workflowID string) bool { return v.p == nil || v.p.WorkflowAllowed(workflowID) }

// viewer authenticates a view request: a bearer token (like /mcp) or the
// session cookie a login link set. It returns a status and message when the
// request is refused. The principal must hold the observe role.
func (u *Handler) viewer(r *http.Request) (viewer, int, string) {
	if u.cfg.Auth == nil {
		return viewer{}, 0, ""
	}
	var p *principal.Principal
	csrf := ""
	if r.Header.Get("Authorization") != "" {
		var why string
		if p, why = u.cfg.Authenticate(r); why != "" {
			return viewer{}, http.StatusUnauthorized, why
		}
	} else {
		g, ok := u.login.session(r, u.store.Clock().Now())
		if !ok {
			return viewer{}, http.StatusUnauthorized, "unauthorized: open the view through a login link: run graph-engineering-mcp ui link --url <this server's URL> with your token, and open the link it prints (it is valid once, for a minute)"
		}
		if p = u.cfg.Auth.Current().Lookup(g.principal); p == nil {
			return viewer{}, http.StatusUnauthorized, "unauthorized: the principal of this login no longer exists; open a new login link"
		}
		csrf = g.csrf
	}
	if !p.HasRole(principal.RoleObserve) {
		return viewer{}, http.StatusForbidden, principal.MissingRole(p, "the live view", []string{principal.RoleObserve}).Error()
	}
	return viewer{p: p, csrf: csrf}, 0, ""
}

func (u *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if u.cfg.OnRefuse != nil {
		reason := "unauthorized"
		if status == http.StatusForbidden {
			reason = "insufficient_scope"
		}
		u.cfg.OnRefuse(reason)
	}
	if strings.HasPrefix(r.URL.Path, "/ui/api/") {
		writeUIJSON(w, r, status, map[string]string{"error": msg})
		return
	}
	http.Error(w, msg, status)
}

func (u *Handler) servePage(w http.ResponseWriter, name string) {
	b, err := fs.ReadFile(uiAssets, "ui/"+name)
	if err != nil {
		http.Error(w, "internal error: missing page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b)
}

var uiAssetTypes = map[string]string{
	"app.js":    "text/javascript; charset=utf-8",
	"style.css": "text/css; charset=utf-8",
}

// serveAsset serves the script and style sheet. They hold no data, so they
// need no login (the pages and the JSON do).
func (u *Handler) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	ct, ok := uiAssetTypes[name]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(uiAssets, "ui/"+name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(b)
}

// takeSlot takes one of the view's own concurrency slots, waiting at most
// uiAdmissionWait; when none frees it answers 503 with busy (or nothing,
// when the client went away) and returns false. The caller frees the slot
// it took (<-u.sem).
func (u *Handler) takeSlot(w http.ResponseWriter, r *http.Request, busy any) bool {
	t := time.NewTimer(uiAdmissionWait)
	defer t.Stop()
	select {
	case u.sem <- struct{}{}:
		return true
	case <-t.C:
		w.Header().Set("Retry-After", "1")
		writeUIJSON(w, r, http.StatusServiceUnavailable, busy)
		return false
	case <-r.Context().Done():
		return false
	}
}

// withSlot runs a JSON read in one of the view's own concurrency slots and
// writes its answer, with an ETag so that an unchanged answer to a poll is
// a 304 without a body.
func (u *Handler) withSlot(w http.ResponseWriter, r *http.Request, read func(context.Context) (any, error)) {
	if !u.takeSlot(w, r, map[string]string{"error": "server busy: the live view serves a few reads at once; retry after a moment"}) {
		return
	}
	defer func() { <-u.sem }()
	ctx, cancel := context.WithTimeout(r.Context(), uiReadTimeout)
	defer cancel()
	out, err := read(ctx)
	if err != nil {
		status, msg := http.StatusInternalServerError, "internal error: the read failed"
		switch {
		case errors.Is(err, taskgraph.ErrNotFound):
			status, msg = http.StatusNotFound, "not found"
		case errors.Is(err, taskgraph.ErrInvalid):
			status, msg = http.StatusBadRequest, err.Error()
		case errors.Is(err, taskgraph.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
			status, msg = http.StatusServiceUnavailable, "unavailable: the database did not answer in time"
		default:
			u.log.Warn("live view read failed", "path", r.URL.Path, "err", err)
		}
		writeUIJSON(w, r, status, map[string]string{"error": msg})
		return
	}
	writeUIJSON(w, r, http.StatusOK, out)
}

// serveWorkflow answers /ui/api/workflows/{id}. Its ETag comes from the
// workflow's version (one row: task count, event chain length and head,
// update time) and the pause in effect, if any, read before anything is built: an unchanged poll is a 304
// that costs that one read, however large the workflow. Time alone changes
// one thing the answer shows, a claim whose lease lapsed (stuck): the
// handler remembers, per ETag, when the next shown claim lapses, and from
// then on answers that ETag with a new answer.
func (u *Handler) serveWorkflow(w http.ResponseWriter, r *http.Request, v viewer, id string) {
	var version string
	if v.allows(id) {
		ctx, cancel := context.WithTimeout(r.Context(), uiReadTimeout)
		ver, err := u.version(ctx, id)
		cancel()
		if err == nil {
			version = ver
			if inm := r.Header.Get("If-None-Match"); strings.HasPrefix(inm, version) && u.unchanged(inm) {
				w.Header().Set("ETag", inm)
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
	}
	u.withSlot(w, r, func(ctx context.Context) (any, error) {
		out, err := u.workflow(ctx, v, id)
		if err == nil && version != "" {
			// The ETag: the version read before the answer, and how many
			// claims it shows stuck (which time alone changes).
			out.etag = version + strconv.Itoa(out.stuck) + `"`
			u.lapseMu.Lock()
			if u.lapses == nil || len(u.lapses) >= uiMaxETags {
				u.lapses = map[string]int64{}
			}
			u.lapses[out.etag] = out.nextLapseMS
			if u.lapseByVersion == nil || len(u.lapseByVersion) >= uiMaxETags {
				u.lapseByVersion = map[string]int64{}
			}
			u.lapseByVersion[version] = out.nextLapseMS
			u.lapseMu.Unlock()
		}
		return out, err
	})
}

// unchanged reports whether the answer that ETag etag names still holds:
// it is remembered, and no claim it shows live has lapsed since.
func (u *Handler) unchanged(etag string) bool {
	u.lapseMu.Lock()
	next, ok := u.lapses[etag]
	u.lapseMu.Unlock()
	return ok && (next == 0 || u.store.Clock().Now().UnixMilli() < next)
}

// uiStamped is an answer that carries the server time it was read at
// (NowMS); the ETag is computed with that time zeroed, so an unchanged state
// polls as 304.
type uiStamped interface{ stamp(withNow bool) }

// uiReadAt is embedded first in every answer that carries its read time:
// now_ms, set only once the ETag is taken.
type uiReadAt struct {
	NowMS int64 `json:"now_ms"`
	now   int64
}

func (a *uiReadAt) stamp(withNow bool) {
	a.NowMS = 0
	if withNow {
		a.NowMS = a.now
	}
}

func readAt(now time.Time) uiReadAt { return uiReadAt{now: now.UnixMilli()} }

func writeUIJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	s, stamped := v.(uiStamped)
	if e, ok := v.(interface{ versionETag() string }); ok && stamped && status == http.StatusOK && e.versionETag() != "" {
		// The ETag was taken from the version before the read.
		w.Header().Set("ETag", e.versionETag())
		s.stamp(true)
	} else if stamped && status == http.StatusOK {
		s.stamp(false)
		b, err := json.Marshal(v)
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		sum := sha256.Sum256(b)
		etag := `"` + hex.EncodeToString(sum[:12]) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		s.stamp(true)
	}
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// uiTime is a server time as Unix milliseconds (0: none).
func uiTime(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// WorkflowList is the answer of /ui/api/workflows: one page of the
// workflows the viewer may see whose id contains Query, the most recently
// changed first.
type WorkflowList struct {
	uiReadAt
	Principal string            `json:"principal,omitempty"`
	Workflows []WorkflowSummary `json:"workflows"`
	Query     string            `json:"query"`
	Page      int               `json:"page"`
	PageSize  int               `json:"page_size"`
	// Matched counts every workflow the viewer may see that matches Query,
	// on every page.
	Matched int `json:"matched"`
	// Truncated: more matching workflows follow on later pages.
	Truncated bool `json:"truncated"`
	PollMS    int  `json:"poll_ms"`
}

// uiListQuery reads the list's parameters: q, a part of a workflow id to
// match (at most UIMaxQueryBytes of UTF-8), and page, from 0 (at most
// UIMaxPage).
func uiListQuery(r *http.Request) (q string, page int, err error) {
	vals := r.URL.Query()
	q = vals.Get("q")
	if len(q) > UIMaxQueryBytes || !utf8.ValidString(q) {
		return "", 0, fmt.Errorf("q: must be at most %d bytes of UTF-8 (got %d bytes)", UIMaxQueryBytes, len(q))
	}
	if s := vals.Get("page"); s != "" {
		page, err = strconv.Atoi(s)
		if err != nil || page < 0 || page > UIMaxPage {
			return "", 0, fmt.Errorf("page: must be a whole number from 0 to %d (got %q)", UIMaxPage, s)
		}
	}
	return q, page, nil
}

// WorkflowSummary is one workflow in the list.
type WorkflowSummary struct {
	WorkflowID  string         `json:"workflow_id"`
	Total       int            `json:"total"`
	Counts      map[string]int `json:"counts"`
	Stuck       int            `json:"stuck"`
	CreatedAtMS int64          `json:"created_at_ms"`
	UpdatedAtMS int64          `json:"updated_at_ms"`
}

func (u *Handler) listWorkflows(ctx context.Context, v viewer, q string, page int) (*WorkflowList, error) {
	now := u.store.Clock().Now()
	all, err := u.store.RecentWorkflows(ctx)
	if err != nil {
		return nil, err
	}
	size := u.pageSize
	out := &WorkflowList{Workflows: []WorkflowSummary{}, Query: q, Page: page, PageSize: size, PollMS: 5 * uiPollMS, uiReadAt: readAt(now)}
	if v.p != nil {
		out.Principal = v.p.Name
	}
	var ids []string
	for _, wl := range all {
		if v.allows(wl.WorkflowID) && strings.Contains(wl.WorkflowID, q) {
			ids = append(ids, wl.WorkflowID)
		}
	}
	out.Matched = len(ids)
	first := min(page*size, len(ids))
	out.Truncated = first+size < len(ids)
	for _, id := range ids[first:min(first+size, len(ids))] {
		// Counts only: a list poll reads no task rows, however large the
		// workflows and their payloads are.
		wf, err := u.store.WorkflowSummary(taskgraph.WithArrival(ctx, now), id)
		if errors.Is(err, taskgraph.ErrNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, err
		}
		s := WorkflowSummary{WorkflowID: id, Total: wf.Total, Counts: map[string]int{}, Stuck: wf.Stuck,
			CreatedAtMS: uiTime(wf.CreatedAt), UpdatedAtMS: uiTime(wf.UpdatedAt)}
		for st, n := range wf.Counts {
			if n > 0 {
				s.Counts[string(st)] = n
			}
		}
		out.Workflows = append(out.Workflows, s)
	}
	return out, nil
}

// uiStuck reports a claim whose holder has not heartbeaten for longer than
// its lease: still claimed, its lease lapsed, and not yet expired by a
// sweep or read.
func uiStuck(t taskgraph.Task, now time.Time) bool {
	return t.State == taskgraph.StateClaimed && !t.LeaseExpiresAt.IsZero() && !now.Before(t.LeaseExpiresAt)
}

// Workflow is the answer of /ui/api/workflows/{id}: the workflow with its
// layout.
type Workflow struct {
	uiReadAt
	WorkflowID  string         `json:"workflow_id"`
	Counts      map[string]int `json:"counts"`
	CreatedAtMS int64          `json:"created_at_ms"`
	UpdatedAtMS int64          `json:"updated_at_ms"`
	Width       int            `json:"width"`
	Height      int            `json:"height"`
	NodeWidth   int            `json:"node_width"`
	NodeHeight  int            `json:"node_height"`
	Nodes       []Node         `json:"nodes"`
	// Edges are [dependency index, task index] pairs into Nodes.
	Edges [][2]int `json:"edges"`
	// PollMS is how long the page waits before asking again: longer once
	// every task has finished.
	PollMS int `json:"poll_ms"`
	// Finished: every task completed, failed or was cancelled.
	Finished bool `json:"finished"`
	// Usage is what the workers of every attempt of every task reported;
	// absent while none did.
	Usage *Usage `json:"usage,omitempty"`
	// Paused says why nothing of the workflow is claimable when an
	// operator paused it, or all claiming (taskgraph.Pause.String).
	Paused string `json:"paused,omitempty"`
	etag   string
	// stuck counts the claims shown stuck; nextLapseMS is when the next
	// claim shown live lapses (0: none).
	stuck       int
	nextLapseMS int64
}

// Usage is reported usage as the view shows it.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// uiUsage is u for the view, nil when zero.
func uiUsage(u taskgraph.Usage) *Usage {
	if u.IsZero() {
		return nil
	}
	return &Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD}
}

func (wf *Workflow) versionETag() string { return wf.etag }

// Node is one task as the view draws it. It never carries a claim token
// or its digest (taskgraph.Task holds neither).
type Node struct {
	TaskID           string `json:"task_id"`
	NodeID           string `json:"node_id"`
	State            string `json:"state"`
	Owner            string `json:"owner,omitempty"`
	Generation       int64  `json:"generation"`
	LeaseExpiresAtMS int64  `json:"lease_expires_at_ms,omitempty"`
	Stuck            bool   `json:"stuck,omitempty"`
	Attempts         int    `json:"attempts"`
	MaxAttempts      int    `json:"max_attempts"`
	Priority         int    `json:"priority,omitempty"`
	// Requires are the capability tags a claimant must advertise.
	Requires []string `json:"requires,omitempty"`
	// ConcurrencyKey is the task's concurrency key, absent when none.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	// DueAtMS is when a pending task that is not yet due becomes claimable.
	DueAtMS int64 `json:"due_at_ms,omitempty"`
	// Gate is set on an approval gate; AwaitingApproval while it awaits a
	// decision (DecideByMS: when the server decides it, absent without a
	// timeout).
	Gate             bool   `json:"gate,omitempty"`
	AwaitingApproval bool   `json:"awaiting_approval,omitempty"`
	DecideByMS       int64  `json:"decide_by_ms,omitempty"`
	Error            string `json:"error,omitempty"`
	StatusMessage    string `json:"status_message,omitempty"`
	// The current (or last) attempt's report: its progress (Done of
	// Total; Total absent when the worker gave none), its message
	// (clipped) and the generation that sent it; all absent without one.
	ProgressDone     *float64 `json:"progress_done,omitempty"`
	ProgressTotal    *float64 `json:"progress_total,omitempty"`
	ReportMessage    string   `json:"report_message,omitempty"`
	ReportGeneration int64    `json:"report_generation,omitempty"`
	// Usage is the task's usage over every attempt; absent when none.
	Usage *Usage `json:"usage,omitempty"`
	Layer int    `json:"layer"`
	X     int    `json:"x"`
	Y     int    `json:"y"`
}

func (u *Handler) workflow(ctx context.Context, v viewer, id string) (*Workflow, error) {
	if !v.allows(id) {
		return nil, taskgraph.ErrNotFound // as a missing one, like inspect
	}
	u.builds.Add(1)
	now := u.store.Clock().Now()
	// Without payloads and results: this read repeats every second for
	// every viewer, and the view shows neither.
	wf, err := u.store.WorkflowGraph(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	index := make(map[string]int, len(wf.Tasks))
	for i, t := range wf.Tasks {
		index[t.NodeID] = i
	}
	deps := make([][]int, len(wf.Tasks))
	var edges [][2]int
	for t, task := range wf.Tasks {
		for _, dep := range task.DependsOn {
			if d, ok := index[dep]; ok {
				deps[t] = append(deps[t], d)
				edges = append(edges, [2]int{d, t})
			}
		}
	}
	if edges == nil {
		edges = [][2]int{}
	}
	layer, xs, ys, width, height := uiLayout(len(wf.Tasks), deps)
	out := &Workflow{WorkflowID: id, Counts: map[string]int{}, CreatedAtMS: uiTime(wf.CreatedAt), UpdatedAtMS: uiTime(wf.UpdatedAt),
		Width: width, Height: height, NodeWidth: NodeWidth, NodeHeight: NodeHeight, Edges: edges, PollMS: uiPollMS, uiReadAt: readAt(now),
		Nodes: make([]Node, len(wf.Tasks)), Usage: uiUsage(wf.Usage)}
	for st, n := range wf.Counts {
		out.Counts[string(st)] = n
	}
	open := wf.Counts[taskgraph.StateBlocked] + wf.Counts[taskgraph.StatePending] + wf.Counts[taskgraph.StateClaimed]
	if len(wf.Tasks) > 0 && open == 0 {
		out.Finished, out.PollMS = true, uiFinishedPollMS
	}
	for i, t := range wf.Tasks {
		out.Nodes[i] = uiNodeOf(t, now, 512)
		if out.Nodes[i].Stuck {
			out.stuck++
		} else if t.State == taskgraph.StateClaimed && !t.LeaseExpiresAt.IsZero() {
			if ms := t.LeaseExpiresAt.UnixMilli(); out.nextLapseMS == 0 || ms < out.nextLapseMS {
				out.nextLapseMS = ms
			}
		}
		out.Nodes[i].Layer, out.Nodes[i].X, out.Nodes[i].Y = layer[i], xs[i], ys[i]
	}
	ps, err := u.store.Pauses(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(ps) > 0 {
		out.Paused = ps[0].String()
	}
	return out, nil
}

// uiNodeOf is task t as the view shows it at now, its texts clipped to
// clip bytes.
func uiNodeOf(t taskgraph.Task, now time.Time, clip int) Node {
	n := Node{TaskID: t.TaskID, NodeID: t.NodeID, State: string(t.State), Owner: t.Owner, Generation: t.Generation,
		Stuck: uiStuck(t, now), Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, Priority: t.Priority, Requires: t.Requires, ConcurrencyKey: t.ConcurrencyKey,
		Error: input.Cut(t.Error, clip), StatusMessage: input.Cut(t.StatusMessage, clip)}
	if t.State == taskgraph.StateClaimed {
		n.LeaseExpiresAtMS = uiTime(t.LeaseExpiresAt)
	}
	if t.State == taskgraph.StatePending && t.DueAt.After(now) {
		n.DueAtMS = uiTime(t.DueAt)
	}
	if t.Kind == taskgraph.KindGate {
		n.Gate, n.AwaitingApproval = true, t.AwaitingApproval
		if t.AwaitingApproval && !t.DueAt.IsZero() {
			n.DecideByMS = uiTime(t.DueAt)
		}
	}
	if rep := t.Report; rep != nil {
		n.ReportGeneration, n.ReportMessage = rep.Generation, input.Cut(rep.StatusMessage, clip)
		if p := rep.Progress; p != nil {
			done := p.Done
			n.ProgressDone, n.ProgressTotal = &done, p.Total
		}
	}
	n.Usage = uiUsage(t.TotalUsage)
	return n
}

// Task is the answer of /ui/api/tasks/{id}: a task's detail and history.
type Task struct {
	uiReadAt
	Task Node `json:"task"`
	// Payload and Result are the JSON text, clipped to 4 KiB.
	Payload       string   `json:"payload,omitempty"`
	Result        string   `json:"result,omitempty"`
	DependsOn     []string `json:"depends_on"`
	CreatedBy     string   `json:"created_by,omitempty"`
	CreatedAtMS   int64    `json:"created_at_ms"`
	UpdatedAtMS   int64    `json:"updated_at_ms"`
	LastHeartbeat int64    `json:"last_heartbeat_at_ms,omitempty"`
	Events        []Event  `json:"events"`
	// EventsOmitted counts older events not shown (beyond UIMaxEvents).
	EventsOmitted int `json:"events_omitted,omitempty"`
}

// Event is one history event with its actor.
type Event struct {
	Seq            int64  `json:"seq"`
	Kind           string `json:"kind"`
	AtMS           int64  `json:"at_ms"`
	Owner          string `json:"owner,omitempty"`
	Generation     int64  `json:"generation"`
	ActorKind      string `json:"actor_kind,omitempty"`
	ActorName      string `json:"actor_name,omitempty"`
	ActorPrincipal string `json:"actor_principal,omitempty"`
	Detail         string `json:"detail,omitempty"`
}

func (u *Handler) task(ctx context.Context, v viewer, id string) (*Task, error) {
	st := u.store
	now := st.Clock().Now()
	// PeekTask, not Task: Task expires a lapsed lease before answering, and
	// the view never writes, so a stuck claim stays visible as stuck until
	// the sweeper expires it.
	t, err := st.PeekTask(ctx, id)
	if err != nil {
		return nil, err
	}
	if !v.allows(t.WorkflowID) {
		return nil, taskgraph.ErrNotFound // as a missing one, like inspect
	}
	evs, err := st.TaskEvents(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &Task{uiReadAt: readAt(now), DependsOn: append([]string{}, t.DependsOn...), CreatedBy: t.CreatedBy,
		CreatedAtMS: uiTime(t.CreatedAt), UpdatedAtMS: uiTime(t.UpdatedAt), Events: []Event{},
		Payload: input.Cut(string(t.Payload), uiMaxText), Result: input.Cut(string(t.Result), uiMaxText)}
	out.Task = uiNodeOf(t, now, uiMaxText)
	for _, e := range evs {
		if (e.Kind == taskgraph.EventHeartbeat || e.Kind == taskgraph.EventClaim) && e.Generation == t.Generation {
			out.LastHeartbeat = uiTime(e.At)
		}
	}
	if len(evs) > UIMaxEvents {
		out.EventsOmitted = len(evs) - UIMaxEvents
		evs = evs[len(evs)-UIMaxEvents:]
	}
	for _, e := range evs {
		detail := ""
		if len(e.Detail) > 0 && string(e.Detail) != "{}" && string(e.Detail) != "null" {
			detail = input.Cut(string(e.Detail), 512)
		}
		out.Events = append(out.Events, Event{Seq: e.Seq, Kind: e.Kind, AtMS: uiTime(e.At), Owner: e.Owner, Generation: e.Generation,
			ActorKind: e.Actor.Kind, ActorName: e.Actor.Name, ActorPrincipal: e.Actor.Principal, Detail: detail})
	}
	return out, nil
}

// AppHTML is the MCP App's document (SEP-1865, io.modelcontextprotocol/ui):
// the live view's drawing assembled from the embedded style sheet and
// scripts into one self-contained page, as a ui:// resource must be.
func AppHTML() (string, error) {
	page, err := fs.ReadFile(uiAssets, "ui/mcp-app.html")
	if err != nil {
		return "", err
	}
	parts := map[string]string{}
	for _, name := range []string{"style.css", "app.js", "mcp-app.js"} {
		b, err := fs.ReadFile(uiAssets, "ui/"+name)
		if err != nil {
			return "", err
		}
		if strings.Contains(strings.ToLower(string(b)), "</script") || strings.Contains(strings.ToLower(string(b)), "</style") {
			return "", fmt.Errorf("ui/%s cannot be inlined: it contains a closing script or style tag", name)
		}
		parts[name] = string(b)
	}
	html := strings.Replace(string(page), "/*STYLE*/", parts["style.css"], 1)
	html = strings.Replace(html, "/*SCRIPT*/", parts["app.js"]+"\n"+parts["mcp-app.js"], 1)
	return html, nil
}
