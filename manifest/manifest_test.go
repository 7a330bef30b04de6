package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
)

func TestDigest(t *testing.T) {
	// SHA-256 of the empty string (FIPS 180-2 test vector).
	if got := Digest(nil); got != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("Digest(empty) = %s", got)
	}
	if got := Digest([]byte("abc")); got != "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("Digest(abc) = %s", got)
	}
	got, err := DigestJSON(map[string]any{"b": 1, "a": []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`{"a":["x"],"b":1}`))
	if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
		t.Errorf("DigestJSON = %s, want %s", got, want)
	}
	if _, err := DigestJSON(func() {}); !errors.Is(err, ErrInvalidJSON) {
		t.Errorf("DigestJSON(func) error = %v", err)
	}
}

func TestValidDigest(t *testing.T) {
	good := Digest([]byte("x"))
	if !ValidDigest(good) {
		t.Errorf("ValidDigest(%s) = false", good)
	}
	for _, bad := range []string{
		"", "sha256:", strings.TrimPrefix(good, "sha256:"), "SHA256:" + good[7:], "sha512:" + good[7:],
		strings.ToUpper(good[:8]) + good[8:], good[:len(good)-1], good + "0",
		good[:len(good)-1] + "g", "sha256:" + strings.ToUpper(good[7:]),
	} {
		if ValidDigest(bad) {
			t.Errorf("ValidDigest(%q) = true", bad)
		}
	}
}

// expectedLimits writes the limits object by hand, members in ascending
// order, from the store's constants.
func expectedLimits(extra string) string {
	return fmt.Sprintf(`{"identifierPattern":%s,"leaseMs":{"default":%d,"max":%d,"min":%d},`+
		`"maxAttempts":{"default":%d,"max":%d,"min":%d},"maxCapabilities":%d,"maxCreateBytes":%d,"maxCreateNodes":%d,"maxDependencyResultBytes":%d,"maxDependsOn":%d,"maxErrorBytes":%d,`+
		`"maxIdentifierLength":%d,"maxJsonDepth":%d,"maxNotBeforeMs":%d,"maxOutlineBytes":%d,"maxOutlineTasks":%d,"maxPayloadBytes":%d,"maxRequires":%d,"maxResultBytes":%d,"maxRetryAfterMs":%d,`+
		`%s"maxTasksPerWorkflow":%d,"maxWaitMs":%d,"priority":{"default":0,"max":%d,"min":%d},"retryDelayMs":{"default":%d,"max":%d,"min":0},"tagPattern":%s}`,
		jsonString(taskgraph.IdentifierPattern),
		lease.DefaultDuration.Milliseconds(), lease.MaxDuration.Milliseconds(), lease.MinDuration.Milliseconds(),
		taskgraph.DefaultMaxAttempts, taskgraph.MaxMaxAttempts, taskgraph.MinMaxAttempts, taskgraph.MaxCapabilities, taskgraph.MaxCreateBytes, taskgraph.MaxCreateNodes,
		taskgraph.MaxDependencyResultBytes, taskgraph.MaxDependsOn, taskgraph.MaxErrorBytes, taskgraph.MaxIdentifierLen, taskgraph.MaxJSONDepth,
		taskgraph.MaxNotBefore.Milliseconds(), MaxOutlineBytes, MaxOutlineTasks, taskgraph.MaxPayloadBytes, taskgraph.MaxRequires, taskgraph.MaxResultBytes, taskgraph.MaxRetryAfter.Milliseconds(), extra,
		taskgraph.MaxTasksPerWorkflow, taskgraph.MaxClaimWait.Milliseconds(), taskgraph.MaxPriority, taskgraph.MinPriority,
		taskgraph.DefaultRetryDelay.Milliseconds(), taskgraph.MaxRetryDelay.Milliseconds(), jsonString(taskgraph.TagPattern))
}

// jsonString quotes an ASCII string without characters that need escaping
// beyond '\\' and '"'.
func jsonString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

const protocolsJSON = `["2024-11-05","2025-03-26","2025-06-18","2025-11-25","2026-07-28"]`

// TestManifestIndependentDigest rebuilds the manifest bytes by hand and
// hashes them with crypto/sha256, without using this package's
// canonicalization.
func TestManifestIndependentDigest(t *testing.T) {
	s := NewSurface(Options{SkillsLoaded: true, SkillURIs: []string{"skill://z", "skill://a"}})
	m, err := Build(s, map[string]int64{"maxStdioLineBytes": 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tools := `["graph_task_cancel","graph_task_claim","graph_task_complete","graph_task_create",` +
		`"graph_task_fail","graph_task_heartbeat","graph_task_inspect"]`
	limits := expectedLimits(`"maxStdioLineBytes":1048576,`)
	head := `{"humanOnlyOperationsExposed":false,"limits":` + limits + `,"protocols":` + protocolsJSON + `,"resources":true,`
	tail := `"skillUris":["skill://a","skill://z"],"skillsExtension":true,"tasksExtension":true,"tools":` + tools + `,"uiExtension":true}`

	sum := sha256.Sum256([]byte(head + tail))
	wantSHA := "sha256:" + hex.EncodeToString(sum[:])
	if m.SHA256() != wantSHA {
		t.Errorf("SHA256() = %s, want %s (over %s)", m.SHA256(), wantSHA, head+tail)
	}
	want := head + `"sha256":"` + wantSHA + `",` + tail
	if got := string(m.Bytes()); got != want {
		t.Errorf("Bytes() =\n%s\nwant\n%s", got, want)
	}
}

func TestManifestKeysAndValues(t *testing.T) {
	m, err := Build(NewSurface(Options{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	wantKeys := []string{"humanOnlyOperationsExposed", "limits", "protocols", "resources", "sha256",
		"skillUris", "skillsExtension", "tasksExtension", "tools", "uiExtension"}
	if !slices.Equal(keys, wantKeys) || !slices.Equal(ManifestKeys(), wantKeys) {
		t.Errorf("manifest keys = %v (ManifestKeys %v), want %v", keys, ManifestKeys(), wantKeys)
	}
	checks := map[string]string{
		"humanOnlyOperationsExposed": "false",
		"skillUris":                  "[]",
		"skillsExtension":            "false",
		"tasksExtension":             "true",
		"uiExtension":                "true",
		"resources":                  "true",
		"protocols":                  protocolsJSON,
		"limits":                     expectedLimits(""),
		"sha256":                     `"` + m.SHA256() + `"`,
	}
	for k, want := range checks {
		if string(doc[k]) != want {
			t.Errorf("%s = %s, want %s", k, doc[k], want)
		}
	}
	var limits struct {
		MaxPayloadBytes int `json:"maxPayloadBytes"`
		LeaseMs         struct{ Min, Max, Default int64 }
		MaxWaitMs       int64 `json:"maxWaitMs"`
	}
	if err := json.Unmarshal(doc["limits"], &limits); err != nil {
		t.Fatal(err)
	}
	if limits.MaxPayloadBytes != taskgraph.MaxPayloadBytes || limits.LeaseMs.Max != lease.MaxDuration.Milliseconds() ||
		limits.MaxWaitMs != taskgraph.MaxClaimWait.Milliseconds() {
		t.Errorf("limits decoded as %+v", limits)
	}
	canon, err := jcs.Canonicalize(b)
	if err != nil || !bytes.Equal(canon, b) {
		t.Errorf("Bytes() is not in canonical form (%v)", err)
	}
	if bytes.HasSuffix(b, []byte("\n")) {
		t.Errorf("Bytes() ends with a newline")
	}
}

func TestManifestDigestStableAndSensitive(t *testing.T) {
	first, err := Build(NewSurface(Options{}), map[string]int64{"maxStdioLineBytes": 4096, "maxHttpBodyBytes": 8192})
	if err != nil {
		t.Fatal(err)
	}
	// Many builds: map iteration order must not leak into the bytes.
	for range 50 {
		again, err := Build(NewSurface(Options{}), map[string]int64{"maxHttpBodyBytes": 8192, "maxStdioLineBytes": 4096})
		if err != nil {
			t.Fatal(err)
		}
		if again.SHA256() != first.SHA256() || !bytes.Equal(again.Bytes(), first.Bytes()) {
			t.Fatalf("manifest not stable: %s vs %s", again.SHA256(), first.SHA256())
		}
	}
	seen := map[string]string{first.SHA256(): "default"}
	variants := map[string]func() (Manifest, error){
		"drop cancel": func() (Manifest, error) {
			p := DefaultProfile()
			p.AllowedTools = slices.DeleteFunc(p.AllowedTools, func(s string) bool { return s == ToolCancel })
			return Build(NewSurface(Options{Profile: &p}), map[string]int64{"maxStdioLineBytes": 4096, "maxHttpBodyBytes": 8192})
		},
		"tasks extension off": func() (Manifest, error) {
			return Build(NewSurface(Options{DisableTasksExtension: true}), map[string]int64{"maxStdioLineBytes": 4096, "maxHttpBodyBytes": 8192})
		},
		"different transport limit": func() (Manifest, error) {
			return Build(NewSurface(Options{}), map[string]int64{"maxStdioLineBytes": 4097, "maxHttpBodyBytes": 8192})
		},
		"a skill": func() (Manifest, error) {
			return Build(NewSurface(Options{SkillsLoaded: true, SkillURIs: []string{"skill://a"}}), map[string]int64{"maxStdioLineBytes": 4096, "maxHttpBodyBytes": 8192})
		},
	}
	for name, build := range variants {
		m, err := build()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if prev, dup := seen[m.SHA256()]; dup {
			t.Errorf("%s has the same digest as %s", name, prev)
		}
		seen[m.SHA256()] = name
		if got, err := Verify(m.Bytes()); err != nil || got != m.SHA256() {
			t.Errorf("%s: Verify = %s, %v", name, got, err)
		}
	}
	dropped, _ := variants["drop cancel"]()
	if bytes.Contains(dropped.Bytes(), []byte(ToolCancel)) {
		t.Errorf("dropped tool still listed: %s", dropped.Bytes())
	}
}

func TestManifestBytesIsACopy(t *testing.T) {
	m, err := Build(NewSurface(Options{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	b[0] = 'X'
	if m.Bytes()[0] != '{' {
		t.Errorf("Bytes() exposes the manifest's storage")
	}
	var zero Manifest
	if zero.Bytes() != nil || zero.SHA256() != "" {
		t.Errorf("zero Manifest is not empty")
	}
}

func TestBuildRejects(t *testing.T) {
	ok := NewSurface(Options{})
	cases := []struct {
		name    string
		s       Surface
		extra   map[string]int64
		wantMsg string
	}{
		{"unknown tool", Surface{Tools: []string{ToolClaim, "graph_task_requeue"}, SkillURIs: []string{}}, nil, `unknown tool "graph_task_requeue"`},
		{"repeated tool", Surface{Tools: []string{ToolClaim, ToolClaim}}, nil, `lists "graph_task_claim" twice`},
		{"tasks extension without inspect", Surface{Tools: []string{ToolCreate}, TasksExtension: true}, nil, "tasksExtension is true"},
		{"ui extension without inspect", Surface{Tools: []string{ToolCreate}, Resources: true, UIExtension: true}, nil, "uiExtension is true"},
		{"ui extension without resources", Surface{Tools: []string{ToolInspect}, UIExtension: true}, nil, "uiExtension is true"},
		{"skills without resources", Surface{Tools: []string{}, SkillsExtension: true}, nil, "resources is false"},
		{"skill URIs without skills", Surface{Tools: []string{}, Resources: true, SkillURIs: []string{"skill://a"}}, nil, "skillsExtension is false"},
		{"empty skill URI", Surface{Resources: true, SkillsExtension: true, SkillURIs: []string{""}}, nil, "non-empty"},
		{"non-UTF-8 skill URI", Surface{Resources: true, SkillsExtension: true, SkillURIs: []string{"skill://\xff"}}, nil, "valid UTF-8"},
		{"repeated skill URI", Surface{Resources: true, SkillsExtension: true, SkillURIs: []string{"s://a", "s://a"}}, nil, `lists "s://a" twice`},
		{"extra limit repeats a store limit", ok, map[string]int64{"maxPayloadBytes": 1}, "repeats a store limit"},
		{"extra limit repeats a nested store limit", ok, map[string]int64{"leaseMs": 1}, "repeats a store limit"},
		{"extra limit with bad name", ok, map[string]int64{"max_line": 1}, "must match"},
		{"extra limit with empty name", ok, map[string]int64{"": 1}, "must match"},
		{"negative extra limit", ok, map[string]int64{"maxLineBytes": -1}, "between 0 and 9007199254740991"},
		{"inexact extra limit", ok, map[string]int64{"maxLineBytes": 1 << 53}, "between 0 and 9007199254740991"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Build(tc.s, tc.extra)
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("Build = %s, %v; want an error matching ErrInvalidManifest", m.Bytes(), err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
		})
	}
	// The largest exact integer is accepted and written exactly.
	m, err := Build(ok, map[string]int64{"maxLineBytes": 1<<53 - 1})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(m.Bytes(), []byte(`"maxLineBytes":9007199254740991`)) {
		t.Errorf("largest exact limit not written exactly: %s", m.Bytes())
	}
}

func TestBuildSortsAHandMadeSurface(t *testing.T) {
	s := Surface{Tools: []string{ToolInspect, ToolCreate}, Resources: true, SkillsExtension: true, SkillURIs: []string{"s://b", "s://a"}}
	m, err := Build(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	if !bytes.Contains(b, []byte(`"tools":["graph_task_create","graph_task_inspect"]`)) ||
		!bytes.Contains(b, []byte(`"skillUris":["s://a","s://b"]`)) {
		t.Errorf("hand-made surface not sorted: %s", b)
	}
	if s.Tools[0] != ToolInspect || s.SkillURIs[0] != "s://b" {
		t.Errorf("Build sorted the caller's slices")
	}
	// A nil slice is written as [].
	m, err = Build(Surface{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(m.Bytes(), []byte(`"tools":[]`)) || !bytes.Contains(m.Bytes(), []byte(`"skillUris":[]`)) {
		t.Errorf("nil slices not written as []: %s", m.Bytes())
	}
}

func TestVerifyRejects(t *testing.T) {
	m, err := Build(NewSurface(Options{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := string(m.Bytes())
	cases := map[string]string{
		"tool renamed":      strings.Replace(b, `"graph_task_cancel"`, `"graph_task_cancex"`, 1),
		"limit changed":     strings.Replace(b, `"maxDependsOn":64`, `"maxDependsOn":65`, 1),
		"not canonical":     strings.Replace(b, `{"humanOnly`, `{ "humanOnly`, 1),
		"trailing newline":  b + "\n",
		"sha256 missing":    strings.Replace(b, `"sha256":"`+m.SHA256()+`",`, ``, 1),
		"sha256 malformed":  strings.Replace(b, m.SHA256(), strings.ToUpper(m.SHA256()), 1),
		"sha256 not string": strings.Replace(b, `"`+m.SHA256()+`"`, `1`, 1),
		"extra key":         strings.Replace(b, `"tools":`, `"toolz":1,"tools":`, 1),
		"not an object":     `[]`,
		"not JSON":          `{`,
	}
	for name, in := range cases {
		if got, err := Verify([]byte(in)); !errors.Is(err, ErrInvalidManifest) {
			t.Errorf("%s: Verify = %q, %v; want ErrInvalidManifest", name, got, err)
		}
	}
	if got, err := Verify(m.Bytes()); err != nil || got != m.SHA256() {
		t.Errorf("Verify(Build output) = %q, %v", got, err)
	}
}

// IsHolderTool names exactly the four tools a lease holder calls.
func TestIsHolderTool(t *testing.T) {
	var got []string
	for _, name := range AllTools {
		if IsHolderTool(name) {
			got = append(got, name)
		}
	}
	if want := []string{ToolCancel, ToolComplete, ToolFail, ToolHeartbeat}; !slices.Equal(got, want) {
		t.Fatalf("holder tools %v, want %v", got, want)
	}
	if IsHolderTool("") || IsHolderTool("graph_task_heartbeat ") {
		t.Fatal("IsHolderTool accepted a name that is not a tool")
	}
}
