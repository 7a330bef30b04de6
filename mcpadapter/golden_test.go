package mcpadapter_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"golang.org/x/tools/txtar"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/httpfront"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/skills"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// Whole-conversation golden tests. Each file in testdata/golden is a small
// txtar archive:
//
//	-- comment --       what the conversation shows (free text)
//	-- skills --        optional: a skills folder (relative to this package)
//	                    the server serves
//	-- capabilities --  optional: the clientCapabilities object of that _meta
//	                    (default {}; the Tasks conversation declares the
//	                    extension here)
//	-- client --        one JSON-RPC message per line, era-neutral: the
//	                    harness adds the 2026-07-28 _meta to every request
//	                    that has none, or runs the initialize handshake
//	                    first for the legacy era; a line starting with "#"
//	                    is a comment
//	-- modern --        the server's answers in the 2026-07-28 era
//	-- legacy --        the server's answers in a 2025-11-25 session (absent:
//	                    the conversation is 2026-07-28 only)
//
// Every conversation is replayed unchanged over stdio (ServeStdio on pipes)
// and over Streamable HTTP (the HTTP front on a loopback listener), in each
// era it has answers for, and the answers must be the same on both
// transports: the wire rules cannot drift between them. Task ids and claim
// tokens differ from run to run; the answers show them as <ID1>, <TOKEN1>,
// … in order of first appearance, and client lines use the same names. The
// clock is the fixtures' fixed manual clock, so times are stable.
//
//	go test ./mcpadapter -run TestGolden -update   # rewrite the answers
//
// (-update is the package's flag for every golden file; here it rewrites the
// answers from the stdio run, and HTTP must still agree with them.)

// goldenArchive is a golden file: a txtar archive whose files are its
// sections, each named once, with nothing before the first.
type goldenArchive struct{ *txtar.Archive }

func parseGolden(data string) (*goldenArchive, error) {
	a := txtar.Parse([]byte(data))
	if c := strings.TrimSpace(string(a.Comment)); c != "" {
		return nil, fmt.Errorf("text before the first section: %q", c)
	}
	seen := map[string]bool{}
	for _, f := range a.Files {
		if seen[f.Name] {
			return nil, fmt.Errorf("section %q appears twice", f.Name)
		}
		seen[f.Name] = true
	}
	return &goldenArchive{a}, nil
}

// section returns the text of section name and whether there is one.
func (a *goldenArchive) section(name string) (string, bool) {
	for _, f := range a.Files {
		if f.Name == name {
			return string(f.Data), true
		}
	}
	return "", false
}

func (a *goldenArchive) names() []string {
	var out []string
	for _, f := range a.Files {
		out = append(out, f.Name)
	}
	return out
}

func (a *goldenArchive) format() string { return string(txtar.Format(a.Archive)) }

func (a *goldenArchive) set(name, text string) {
	for i := range a.Files {
		if a.Files[i].Name == name {
			a.Files[i].Data = []byte(text)
			return
		}
	}
	a.Files = append(a.Files, txtar.File{Name: name, Data: []byte(text)})
}

// goldenVars maps the run's task ids and claim tokens to stable names.
type goldenVars struct {
	real  map[string]string // name -> value
	names map[string]string // value -> name
	ids   int
	toks  int
}

var (
	ulidRE       = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	tokenFieldRE = regexp.MustCompile(`\\?"claim_token\\?":\\?"([A-Za-z0-9_-]{32})\\?"`)
	placeholdRE  = regexp.MustCompile(`<(ID|TOKEN)[0-9]+>`)
	// A receipt digest covers the task id, so it differs from run to run;
	// the manifest digest does not, and stays in the answers.
	receiptRE = regexp.MustCompile(`(\\?"receiptSha256\\?":\\?")sha256:[0-9a-f]{64}`)
)

func newGoldenVars() *goldenVars {
	return &goldenVars{real: map[string]string{}, names: map[string]string{}}
}

// normalize replaces the run's ids and tokens in an answer by their names.
func (v *goldenVars) normalize(line string) string {
	for _, m := range tokenFieldRE.FindAllStringSubmatch(line, -1) {
		if _, ok := v.names[m[1]]; !ok {
			v.toks++
			name := fmt.Sprintf("<TOKEN%d>", v.toks)
			v.names[m[1]], v.real[name] = name, m[1]
		}
	}
	for tok, name := range v.names {
		if strings.HasPrefix(name, "<TOKEN") {
			line = strings.ReplaceAll(line, tok, name)
		}
	}
	line = receiptRE.ReplaceAllString(line, "${1}<RECEIPT>")
	return ulidRE.ReplaceAllStringFunc(line, func(id string) string {
		name, ok := v.names[id]
		if !ok {
			v.ids++
			name = fmt.Sprintf("<ID%d>", v.ids)
			v.names[id], v.real[name] = name, id
		}
		return name
	})
}

// expand puts the run's values back into a client line.
func (v *goldenVars) expand(t *testing.T, line string) string {
	return placeholdRE.ReplaceAllStringFunc(line, func(name string) string {
		val, ok := v.real[name]
		if !ok {
			t.Fatalf("client line names %s before any answer did: %s", name, line)
		}
		return val
	})
}

// canonical re-encodes a JSON message with sorted keys, so transports that
// order members differently still compare equal.
func canonical(b []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "NOT JSON: " + string(bytes.TrimSpace(b))
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// goldenMeta is the _meta the harness adds to 2026-07-28 requests.
func goldenMeta(caps json.RawMessage) map[string]any {
	if len(caps) == 0 {
		caps = json.RawMessage(`{}`)
	}
	return map[string]any{
		wire.MetaProtocolVersion:             manifest.ModernVersion,
		wire.MetaClientCapabilities:          caps,
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "golden", "version": "1"},
	}
}

// goldenMessage is a client line as the harness sends it.
type goldenMessage struct {
	text   string // the line to send
	isCall bool   // a request with an id: it gets an answer
	method string
	name   string // Mcp-Name for HTTP
	ver    string // the protocol version its _meta names, if any
}

func prepareLine(line, era string, caps json.RawMessage) goldenMessage {
	m := goldenMessage{text: line}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if dec.Decode(&obj) != nil || obj == nil {
		// Not an object (a parse error or a batch): it is answered by id null.
		m.isCall = true
		return m
	}
	_, hasID := obj["id"]
	json.Unmarshal(obj["method"], &m.method)
	m.isCall = hasID || m.method == ""
	var params map[string]json.RawMessage
	if p, ok := obj["params"]; ok {
		if json.Unmarshal(p, &params) != nil {
			return m
		}
	}
	if era == "modern" && m.method != "" && params["_meta"] == nil && obj["params"] != nil || era == "modern" && m.method != "" && obj["params"] == nil {
		if params == nil {
			params = map[string]json.RawMessage{}
		}
		mb, _ := json.Marshal(goldenMeta(caps))
		params["_meta"] = mb
		pb, _ := json.Marshal(params)
		obj["params"] = pb
		b, _ := json.Marshal(obj)
		m.text = string(b)
	}
	if meta, ok := params["_meta"]; ok {
		var mm map[string]any
		json.Unmarshal(meta, &mm)
		m.ver, _ = mm[wire.MetaProtocolVersion].(string)
	}
	if m.ver == "" && era == "modern" && m.method != "" {
		m.ver = manifest.ModernVersion
	}
	for _, k := range []string{"name", "uri", "taskId"} {
		var s string
		if json.Unmarshal(params[k], &s) == nil && s != "" {
			m.name = s
			break
		}
	}
	return m
}

// goldenTransport sends one prepared message and returns its answer.
type goldenTransport interface {
	start(t *testing.T, era string, opts ...goldenOpt)
	send(t *testing.T, m goldenMessage) []byte // nil when there is no answer
}

// stdioGolden runs ServeStdio on pipes.
type stdioGolden struct {
	in  *io.PipeWriter
	out *bufio.Reader
}

func (s *stdioGolden) start(t *testing.T, era string, opts ...goldenOpt) {
	srv := newGoldenServer(t, opts...)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeStdio(ctx, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		testwait.Recv(t, "ServeStdio to return after its input closed", done)
	})
	s.in, s.out = inW, bufio.NewReader(outR)
	if era == "legacy" {
		s.send(t, goldenMessage{text: `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"golden","version":"1"}}}`, isCall: true})
		s.send(t, goldenMessage{text: `{"jsonrpc":"2.0","method":"notifications/initialized"}`})
	}
}

func (s *stdioGolden) send(t *testing.T, m goldenMessage) []byte {
	t.Helper()
	if _, err := io.WriteString(s.in, m.text+"\n"); err != nil {
		t.Fatalf("stdio write: %v", err)
	}
	if !m.isCall {
		return nil
	}
	type result struct {
		line []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := s.out.ReadBytes('\n')
		ch <- result{line, err}
	}()
	r := testwait.Recv(t, "the stdio answer to "+m.text, ch)
	if r.err != nil {
		t.Fatalf("stdio read: %v", r.err)
	}
	return r.line
}

// httpGolden POSTs each message to the HTTP front.
type httpGolden struct {
	url     string
	session string
}

func (h *httpGolden) start(t *testing.T, era string, opts ...goldenOpt) {
	front, err := httpfront.New(newGoldenServer(t, opts...), httpfront.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(front)
	t.Cleanup(func() {
		ts.Close()
		front.AbortCalls()
		front.CloseSessions()
	})
	h.url = ts.URL + httpfront.MCPPath
	if era == "legacy" {
		r := h.post(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"golden","version":"1"}}}`, nil)
		h.session = r.Header.Get(wire.HeaderSessionID)
		if h.session == "" {
			t.Fatalf("http: initialize gave no session: %s", r.body)
		}
		h.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{wire.HeaderSessionID: h.session, wire.HeaderProtocolVersion: "2025-11-25"})
	}
}

// goldenResponse is one HTTP answer.
type goldenResponse struct {
	*http.Response
	body []byte
}

// post sends body with the usual headers plus extra.
func (h *httpGolden) post(t *testing.T, body string, extra map[string]string) goldenResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return goldenResponse{resp, b}
}

func (h *httpGolden) send(t *testing.T, m goldenMessage) []byte {
	t.Helper()
	hdr := map[string]string{}
	if h.session != "" {
		hdr[wire.HeaderSessionID] = h.session
		hdr[wire.HeaderProtocolVersion] = "2025-11-25"
	} else if m.ver != "" {
		hdr[wire.HeaderProtocolVersion] = m.ver
		hdr[wire.HeaderMethod] = m.method
		if m.name != "" {
			hdr[wire.HeaderName] = m.name
		}
	}
	r := h.post(t, m.text, hdr)
	if !m.isCall {
		if r.StatusCode != http.StatusAccepted {
			t.Errorf("http: notification %s got HTTP %d %.400s", m.text, r.StatusCode, r.body)
		}
		return nil
	}
	return r.body
}

// replay runs the client lines over tr in era and returns the normalized
// answers, one per line.
func replay(t *testing.T, tr goldenTransport, era, client string, caps json.RawMessage, opts ...goldenOpt) string {
	t.Helper()
	tr.start(t, era, opts...)
	vars := newGoldenVars()
	var out strings.Builder
	for _, line := range strings.Split(client, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := prepareLine(vars.expand(t, line), era, caps)
		if ans := tr.send(t, m); ans != nil {
			out.WriteString(vars.normalize(canonical(ans)))
			out.WriteString("\n")
		}
	}
	return out.String()
}

func TestGoldenConversations(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden conversations (%v)", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			a, err := parseGolden(string(data))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			client, ok := a.section("client")
			if !ok {
				t.Fatalf("%s has no client section", file)
			}
			eras := []string{"modern"}
			if _, ok := a.section("legacy"); ok {
				eras = append(eras, "legacy")
			}
			capsText, _ := a.section("capabilities")
			caps := json.RawMessage(strings.TrimSpace(capsText))
			if len(caps) > 0 && !json.Valid(caps) {
				t.Fatalf("%s: the capabilities section is not JSON", file)
			}
			var opts []goldenOpt
			if dir, _ := a.section("skills"); strings.TrimSpace(dir) != "" {
				dir = strings.TrimSpace(dir)
				opts = append(opts, goldenSkills(t, dir))
			}
			changed := false
			for _, era := range eras {
				got := replay(t, &stdioGolden{}, era, client, caps, opts...)
				if *mcpadapter.Update {
					if want, _ := a.section(era); want != got {
						a.set(era, got)
						changed = true
					}
				} else if want, _ := a.section(era); got != want {
					t.Errorf("%s, %s era, stdio: answers differ from the golden file (rerun with -update if intended):\n%s", file, era, lineDiff(want, got))
				}
				if gotHTTP := replay(t, &httpGolden{}, era, client, caps, opts...); gotHTTP != got {
					t.Errorf("%s, %s era: HTTP answers differ from stdio's:\n%s", file, era, lineDiff(got, gotHTTP))
				}
			}
			if changed {
				if err := os.WriteFile(file, []byte(a.format()), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("rewrote %s", file)
			}
		})
	}
}

// lineDiff shows the first differing lines of two transcripts.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 4; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			at := 0
			for at < len(wl) && at < len(gl) && wl[at] == gl[at] {
				at++
			}
			fmt.Fprintf(&b, "line %d, from byte %d:\n  want %s\n  got  %s\n", i+1, at, window(wl, at), window(gl, at))
			shown++
		}
	}
	return b.String()
}

// window shows s around byte at, clipped to a readable width.
func window(s string, at int) string {
	lo, hi := max(0, at-80), min(len(s), at+160)
	out := s[lo:hi]
	if lo > 0 {
		out = "…" + out
	}
	if hi < len(s) {
		out += "…"
	}
	return out
}

// The harness's own parts, so a golden run cannot pass by accident.
func TestGoldenHarness(t *testing.T) {
	a, err := parseGolden("-- comment --\nx\n-- client --\n{\"a\":1}\n-- modern --\n")
	if err != nil {
		t.Fatal(err)
	}
	if client, _ := a.section("client"); !slices.Equal(a.names(), []string{"comment", "client", "modern"}) || client != "{\"a\":1}\n" {
		t.Fatalf("parse: %v %q", a.names(), client)
	}
	if _, err := parseGolden("-- client --\n-- client --\n"); err == nil {
		t.Error("a section named twice must be refused")
	}
	if _, err := parseGolden("junk\n-- client --\n"); err == nil {
		t.Error("text before the first section must be refused")
	}
	v := newGoldenVars()
	line := `{"task_id":"01KQHC8AM004TQJQ9NV5P42EEG","lease":{"claim_token":"abcdefghijklmnopqrstuvwxyz012345"},"text":"{\"claim_token\":\"abcdefghijklmnopqrstuvwxyz012345\",\"task_id\":\"01KQHC8AM004TQJQ9NV5P42EEG\"}"}`
	got := v.normalize(line)
	if strings.Contains(got, "01KQHC8AM004TQJQ9NV5P42EEG") || strings.Contains(got, "abcdefghijklmnopqrstuvwxyz012345") ||
		strings.Count(got, "<ID1>") != 2 || strings.Count(got, "<TOKEN1>") != 2 {
		t.Fatalf("normalize: %s", got)
	}
	if e := v.expand(t, `{"task_id":"<ID1>","claim_token":"<TOKEN1>"}`); e != `{"task_id":"01KQHC8AM004TQJQ9NV5P42EEG","claim_token":"abcdefghijklmnopqrstuvwxyz012345"}` {
		t.Fatalf("expand: %s", e)
	}
	m := prepareLine(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, "modern", nil)
	if !m.isCall || m.name != "x" || m.ver != manifest.ModernVersion || !strings.Contains(m.text, wire.MetaProtocolVersion) {
		t.Fatalf("prepare: %+v", m)
	}
	if m := prepareLine(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "legacy", nil); strings.Contains(m.text, "_meta") || m.ver != "" {
		t.Fatalf("legacy lines get no _meta: %+v", m)
	}
	_ = jsonrpc.CodeParseError
}

// goldenOpt changes the configuration of a conversation's server.
type goldenOpt func(*mcpadapter.Config)

// newGoldenServer is a server on a fresh store with the fixtures' fixed
// manual clock, so times are stable.
func newGoldenServer(t *testing.T, opts ...goldenOpt) *mcpadapter.Server {
	t.Helper()
	clock := lease.NewManualClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "tasks.db"), taskgraph.Options{Clock: clock}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := mcpadapter.Config{Store: st, Version: "test", Surface: manifest.NewSurface(manifest.Options{}),
		ExtraLimits: map[string]int64{"maxStdioLineBytes": mcpadapter.MaxStdioLineBytes}}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := mcpadapter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// goldenSkills serves the skills in dir (relative to this package).
func goldenSkills(t *testing.T, dir string) goldenOpt {
	t.Helper()
	set, _, err := skills.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *mcpadapter.Config) {
		c.Surface = manifest.NewSurface(manifest.Options{SkillsLoaded: true, SkillURIs: set.URIs()})
		c.Skills = set
	}
}
