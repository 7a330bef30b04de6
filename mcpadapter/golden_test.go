package mcpadapter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
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
// and over Streamable HTTP (NewHTTPHandler on a loopback listener), in each
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

// goldenArchive is a parsed txtar file.
type goldenArchive struct {
	names    []string
	sections map[string]string
}

func parseGolden(data string) (*goldenArchive, error) {
	a := &goldenArchive{sections: map[string]string{}}
	cur := ""
	var b strings.Builder
	flush := func() {
		if cur != "" {
			a.sections[cur] = b.String()
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(data, "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			cur = strings.TrimSpace(trimmed[3 : len(trimmed)-3])
			if _, dup := a.sections[cur]; dup {
				return nil, fmt.Errorf("section %q appears twice", cur)
			}
			a.names = append(a.names, cur)
			continue
		}
		if cur == "" {
			if strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("text before the first section: %q", trimmed)
			}
			continue
		}
		b.WriteString(line)
	}
	flush()
	return a, nil
}

func (a *goldenArchive) format() string {
	var b strings.Builder
	for _, n := range a.names {
		fmt.Fprintf(&b, "-- %s --\n", n)
		s := a.sections[n]
		b.WriteString(s)
		if s != "" && !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func (a *goldenArchive) set(name, text string) {
	if _, ok := a.sections[name]; !ok {
		a.names = append(a.names, name)
	}
	a.sections[name] = text
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
		metaProtocolVersion:                  modern,
		metaClientCapabilities:               caps,
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
		m.ver, _ = mm[metaProtocolVersion].(string)
	}
	if m.ver == "" && era == "modern" && m.method != "" {
		m.ver = modern
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
	start(t *testing.T, era string, opts ...fixtureOpt)
	send(t *testing.T, m goldenMessage) []byte // nil when there is no answer
}

// stdioGolden runs ServeStdio on pipes.
type stdioGolden struct {
	in  *io.PipeWriter
	out *bufio.Reader
}

func (s *stdioGolden) start(t *testing.T, era string, opts ...fixtureOpt) {
	f := newFixture(t, opts...)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.srv.ServeStdio(ctx, inR, outW)
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

// httpGolden POSTs each message to the Streamable HTTP handler.
type httpGolden struct {
	f       *httpFixture
	session string
}

func (h *httpGolden) start(t *testing.T, era string, opts ...fixtureOpt) {
	h.f = newHTTPFixture(t, HTTPOptions{}, opts...)
	if era == "legacy" {
		r := h.f.post(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"golden","version":"1"}}}`, nil)
		h.session = r.header.Get(headerSessionID)
		if h.session == "" {
			t.Fatalf("http: initialize gave no session: %s", r.body)
		}
		h.f.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{headerSessionID: h.session, headerProtocolVersion: "2025-11-25"})
	}
}

func (h *httpGolden) send(t *testing.T, m goldenMessage) []byte {
	t.Helper()
	hdr := map[string]string{}
	if h.session != "" {
		hdr[headerSessionID] = h.session
		hdr[headerProtocolVersion] = "2025-11-25"
	} else if m.ver != "" {
		hdr[headerProtocolVersion] = m.ver
		hdr[headerMethod] = m.method
		if m.name != "" {
			hdr[headerName] = m.name
		}
	}
	r := h.f.post(m.text, hdr)
	if !m.isCall {
		if r.status != http.StatusAccepted {
			t.Errorf("http: notification %s got HTTP %d %s", m.text, r.status, clipBody(r.body))
		}
		return nil
	}
	return r.body
}

// replay runs the client lines over tr in era and returns the normalized
// answers, one per line.
func replay(t *testing.T, tr goldenTransport, era, client string, caps json.RawMessage, opts ...fixtureOpt) string {
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
			client, ok := a.sections["client"]
			if !ok {
				t.Fatalf("%s has no client section", file)
			}
			eras := []string{"modern"}
			if _, ok := a.sections["legacy"]; ok {
				eras = append(eras, "legacy")
			}
			caps := json.RawMessage(strings.TrimSpace(a.sections["capabilities"]))
			if len(caps) > 0 && !json.Valid(caps) {
				t.Fatalf("%s: the capabilities section is not JSON", file)
			}
			var opts []fixtureOpt
			if dir := strings.TrimSpace(a.sections["skills"]); dir != "" {
				opts = append(opts, skillsFixture(t, dir))
			}
			changed := false
			for _, era := range eras {
				got := replay(t, &stdioGolden{}, era, client, caps, opts...)
				if *update {
					if a.sections[era] != got {
						a.set(era, got)
						changed = true
					}
				} else if want := a.sections[era]; got != want {
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
	if err != nil || !slices.Equal(a.names, []string{"comment", "client", "modern"}) || a.sections["client"] != "{\"a\":1}\n" {
		t.Fatalf("parse: %v %v %q", err, a.names, a.sections)
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
	if !m.isCall || m.name != "x" || m.ver != modern || !strings.Contains(m.text, metaProtocolVersion) {
		t.Fatalf("prepare: %+v", m)
	}
	if m := prepareLine(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "legacy", nil); strings.Contains(m.text, "_meta") || m.ver != "" {
		t.Fatalf("legacy lines get no _meta: %+v", m)
	}
	_ = jsonrpc.CodeParseError
}
