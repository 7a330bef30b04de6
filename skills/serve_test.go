package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"
)

// newTestServer builds a server the way the adapter is meant to: explicit
// capabilities with resources and the extension, then Register.
func newTestServer(t *testing.T, set *Set, opts RegisterOptions) *mcp.Server {
	t.Helper()
	caps := &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{}}
	caps.AddExtension(ExtensionID, CapabilityValue(set))
	s := mcp.NewServer(&mcp.Implementation{Name: "skills-test", Version: "0.0.1"}, &mcp.ServerOptions{Capabilities: caps})
	if err := Register(s, set, opts); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return s
}

// connect runs s on an in-memory transport and returns a real SDK client
// session able to send the extension's methods. version "" is the
// client's default, the modern 2026-07-28 era.
func connect(t *testing.T, s *mcp.Server, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "0.0.1"}, nil)
	for _, err := range []error{
		mcp.AddSendingCustomMethod[*ListParams, *ListResult](c, MethodList),
		mcp.AddSendingCustomMethod[*GetParams, *GetResult](c, MethodGet),
		mcp.AddSendingCustomMethod[*DirectoryReadParams, *DirectoryReadResult](c, MethodDirectoryRead),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(ctx, ct, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func fixtureSession(t *testing.T, version string) (*Set, *mcp.ClientSession) {
	t.Helper()
	set, _, _ := loadQuiet(t, fixtureDir)
	return set, connect(t, newTestServer(t, set, RegisterOptions{TTL: 90 * time.Second}), version)
}

func rpcError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v is not a JSON-RPC error", err)
	}
	return we
}

// yamlFrontmatterAsJSON parses a SKILL.md's frontmatter with the YAML
// library directly, as a host verifying an entry would, and returns it as
// generic JSON values.
func yamlFrontmatterAsJSON(t *testing.T, skillMD []byte) map[string]any {
	t.Helper()
	parts := strings.SplitN(string(skillMD), "---\n", 3)
	var m map[string]any
	if err := yaml.Unmarshal([]byte(parts[1]), &m); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestServeCapability(t *testing.T) {
	_, cs := fixtureSession(t, "")
	caps := cs.InitializeResult().Capabilities
	if caps.Resources == nil {
		t.Error("resources capability not declared")
	}
	if got := caps.Extensions[ExtensionID]; !reflect.DeepEqual(got, map[string]any{"directoryRead": true}) {
		t.Errorf("extension settings = %#v", got)
	}
}

func TestServeResources(t *testing.T) {
	set, cs := fixtureSession(t, "")
	ctx := context.Background()

	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	byURI := map[string]*mcp.Resource{}
	for _, r := range list.Resources {
		got = append(got, r.URI)
		byURI[r.URI] = r
	}
	sort.Strings(got)
	var want []string
	for _, sk := range set.Skills() {
		for _, p := range diskFiles(t, fixtureDir, sk.Path) {
			want = append(want, "skill://"+sk.Path+"/"+p)
		}
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("resources/list = %v\nwant %v", got, want)
	}

	md := byURI["skill://git-workflow/SKILL.md"]
	if md.MIMEType != "text/markdown" || md.Name != "git-workflow" ||
		md.Description != "Follow this team's Git conventions for branching, commits and pull requests." {
		t.Errorf("SKILL.md resource = %+v", md)
	}
	if md.Meta[MetaVersion] != "1.2.0" || md.Meta[MetaRequirements] != "git 2.40 or later" {
		t.Errorf("SKILL.md _meta = %v", md.Meta)
	}
	if p, _ := md.Meta[MetaProvenance].(map[string]any); p["source"] != "https://github.com/graph-engineering/skills" || p["revision"] != "3f2c1a9" {
		t.Errorf("provenance _meta = %v", md.Meta[MetaProvenance])
	}

	// Every file reads back byte for byte, with the digest in its _meta.
	for _, uri := range want {
		rel := strings.TrimPrefix(uri, "skill://")
		disk, err := os.ReadFile(filepath.Join(fixtureDir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		if len(res.Contents) != 1 {
			t.Fatalf("read %s: %d contents", uri, len(res.Contents))
		}
		c := res.Contents[0]
		served := []byte(c.Text)
		if c.Blob != nil {
			served = c.Blob
		}
		if string(served) != string(disk) {
			t.Errorf("read %s: bytes differ from disk", uri)
		}
		if byURI[uri].Meta[MetaDigest] != sha256Digest(disk) {
			t.Errorf("%s: _meta digest %v, want %s", uri, byURI[uri].Meta[MetaDigest], sha256Digest(disk))
		}
		if strings.HasSuffix(uri, "/SKILL.md") && c.MIMEType != "text/markdown" {
			t.Errorf("read %s: mimeType %q", uri, c.MIMEType)
		}
	}
}

func TestServeSkillsListAndGet(t *testing.T) {
	set, cs := fixtureSession(t, "")
	ctx := context.Background()

	list, err := mcp.CallCustomMethod[*ListParams, *ListResult](ctx, cs, MethodList, &ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if list.ResultType != "complete" || list.TTLMs != 90000 || list.CacheScope != "public" || list.NextCursor != "" {
		t.Errorf("list envelope: resultType %q ttlMs %d cacheScope %q nextCursor %q", list.ResultType, list.TTLMs, list.CacheScope, list.NextCursor)
	}
	var uris []string
	for _, e := range list.Skills {
		uris = append(uris, e.URI)
	}
	if !slices.Equal(uris, set.URIs()) {
		t.Fatalf("skills/list URIs %v, want %v", uris, set.URIs())
	}
	for _, e := range list.Skills {
		skillPath := strings.TrimSuffix(strings.TrimPrefix(e.URI, "skill://"), "/SKILL.md")
		disk, err := os.ReadFile(filepath.Join(fixtureDir, skillPath, "SKILL.md"))
		if err != nil {
			t.Fatal(err)
		}
		// Frontmatter equals what a host parsing the file itself gets.
		var fm map[string]any
		if err := json.Unmarshal(e.Frontmatter, &fm); err != nil {
			t.Fatal(err)
		}
		if want := yamlFrontmatterAsJSON(t, disk); !reflect.DeepEqual(fm, want) {
			t.Errorf("%s frontmatter %v, want %v", e.URI, fm, want)
		}
		if last := skillPath[strings.LastIndexByte(skillPath, '/')+1:]; fm["name"] != last {
			t.Errorf("%s: name %v is not the last path segment", e.URI, fm["name"])
		}
		// Resources: every file exactly once, digests recomputed from disk.
		var got []string
		for _, r := range e.Resources {
			data, err := os.ReadFile(filepath.Join(fixtureDir, filepath.FromSlash(strings.TrimPrefix(r.URI, "skill://"))))
			if err != nil {
				t.Fatalf("%s: %v", r.URI, err)
			}
			if r.Digest != sha256Digest(data) || r.Size != int64(len(data)) {
				t.Errorf("%s: digest %s size %d, want %s %d", r.URI, r.Digest, r.Size, sha256Digest(data), len(data))
			}
			got = append(got, strings.TrimPrefix(r.URI, "skill://"+skillPath+"/"))
		}
		sort.Strings(got)
		if want := diskFiles(t, fixtureDir, skillPath); !slices.Equal(got, want) {
			t.Errorf("%s resources %v, want %v", e.URI, got, want)
		}

		g, err := mcp.CallCustomMethod[*GetParams, *GetResult](ctx, cs, MethodGet, &GetParams{URI: e.URI})
		if err != nil {
			t.Fatal(err)
		}
		if g.ResultType != "complete" || g.TTLMs != 90000 || g.CacheScope != "public" {
			t.Errorf("get envelope: %q %d %q", g.ResultType, g.TTLMs, g.CacheScope)
		}
		if !reflect.DeepEqual(g.Skill.Resources, e.Resources) || string(g.Skill.Frontmatter) != string(e.Frontmatter) || g.Skill.URI != e.URI {
			t.Errorf("skills/get %s differs from its skills/list entry", e.URI)
		}
	}
}

// Private and refused skills are indistinguishable from skills that never
// existed, through every method.
func TestServeUnknownAndPrivateLookAlike(t *testing.T) {
	_, cs := fixtureSession(t, "")
	ctx := context.Background()
	norm := func(e *jsonrpc.Error, uri string) string {
		return fmt.Sprintf("%d|%s|%s", e.Code, strings.ReplaceAll(e.Message, uri, "URI"), strings.ReplaceAll(string(e.Data), uri, "URI"))
	}
	type probe struct {
		name string
		call func(uri string) error
	}
	probes := []probe{
		{"skills/get", func(uri string) error {
			_, err := mcp.CallCustomMethod[*GetParams, *GetResult](ctx, cs, MethodGet, &GetParams{URI: uri})
			return err
		}},
		{"resources/read", func(uri string) error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			return err
		}},
		{"resources/directory/read", func(uri string) error {
			_, err := mcp.CallCustomMethod[*DirectoryReadParams, *DirectoryReadResult](ctx, cs, MethodDirectoryRead,
				&DirectoryReadParams{URI: strings.TrimSuffix(uri, "/SKILL.md")})
			return err
		}},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			unknown := rpcError(t, p.call("skill://no-such-skill/SKILL.md"))
			if unknown.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("unknown: code %d, want -32602", unknown.Code)
			}
			want := norm(unknown, strings.TrimSuffix("skill://no-such-skill/SKILL.md", pickSuffix(p.name)))
			for _, uri := range []string{"skill://internal-notes/SKILL.md", "skill://tool-hungry/SKILL.md", "skill://leaky/SKILL.md"} {
				e := rpcError(t, p.call(uri))
				if got := norm(e, strings.TrimSuffix(uri, pickSuffix(p.name))); got != want {
					t.Errorf("%s: error %q, want the unknown-URI error %q", uri, got, want)
				}
			}
		})
	}
	// A served file that is not a SKILL.md is not a skill.
	e := rpcError(t, func() error {
		_, err := mcp.CallCustomMethod[*GetParams, *GetResult](ctx, cs, MethodGet, &GetParams{URI: "skill://git-workflow/scripts/check.sh"})
		return err
	}())
	if e.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("skills/get of a non-SKILL.md: code %d", e.Code)
	}
	// Path traversal finds nothing.
	_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "skill://git-workflow/../leaky/references/setup.md"})
	if rpcError(t, err).Code != jsonrpc.CodeInvalidParams {
		t.Errorf("traversal: %v", err)
	}
	// Missing params.uri.
	_, err = mcp.CallCustomMethod[*GetParams, *GetResult](ctx, cs, MethodGet, &GetParams{})
	if rpcError(t, err).Code != jsonrpc.CodeInvalidParams {
		t.Errorf("empty uri: %v", err)
	}
}

func pickSuffix(method string) string {
	if method == "resources/directory/read" {
		return "/SKILL.md"
	}
	return ""
}

func TestServeDirectoryRead(t *testing.T) {
	_, cs := fixtureSession(t, "")
	ctx := context.Background()
	read := func(uri string) ([]string, error) {
		res, err := mcp.CallCustomMethod[*DirectoryReadParams, *DirectoryReadResult](ctx, cs, MethodDirectoryRead, &DirectoryReadParams{URI: uri})
		if err != nil {
			return nil, err
		}
		if res.ResultType != "complete" {
			t.Errorf("%s: resultType %q", uri, res.ResultType)
		}
		var out []string
		for _, r := range res.Resources {
			out = append(out, r.URI+" "+r.Name+" "+r.MIMEType)
		}
		return out, nil
	}
	cases := map[string][]string{
		"skill://acme": {"skill://acme/billing billing inode/directory"},
		"skill://acme/billing/refunds": {
			"skill://acme/billing/refunds/SKILL.md SKILL.md text/markdown",
			"skill://acme/billing/refunds/examples examples inode/directory",
		},
		"skill://acme/billing/refunds/examples": {
			"skill://acme/billing/refunds/examples/email.md email.md text/markdown",
			"skill://acme/billing/refunds/examples/templates templates inode/directory",
		},
		"skill://git-workflow": {
			"skill://git-workflow/SKILL.md SKILL.md text/markdown",
			"skill://git-workflow/references references inode/directory",
			"skill://git-workflow/scripts scripts inode/directory",
		},
	}
	for uri, want := range cases {
		got, err := read(uri)
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s children:\n%v\nwant\n%v", uri, got, want)
		}
	}
	for _, uri := range []string{"skill://git-workflow/SKILL.md", "skill://git-workflow/", "skill://nowhere", "skill://internal-notes", "skill://git-workflow/.notes"} {
		_, err := read(uri)
		if e := rpcError(t, err); e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: code %d", uri, e.Code)
		}
	}
	_, err := mcp.CallCustomMethod[*DirectoryReadParams, *DirectoryReadResult](ctx, cs, MethodDirectoryRead,
		&DirectoryReadParams{URI: "skill://git-workflow", Cursor: "bogus"})
	if rpcError(t, err).Code != jsonrpc.CodeInvalidParams {
		t.Errorf("cursor: %v", err)
	}
}

func TestServeEmptyDirectoryAndEmptyFile(t *testing.T) {
	dir := t.TempDir()
	goodSkill(t, dir, "s")
	writeFile(t, dir, "s/empty.txt", "")
	if err := os.MkdirAll(filepath.Join(dir, "s", "nothing"), 0o755); err != nil {
		t.Fatal(err)
	}
	set, _, _ := loadQuiet(t, dir)
	cs := connect(t, newTestServer(t, set, RegisterOptions{}), "")
	ctx := context.Background()
	res, err := mcp.CallCustomMethod[*DirectoryReadParams, *DirectoryReadResult](ctx, cs, MethodDirectoryRead, &DirectoryReadParams{URI: "skill://s/nothing"})
	if err != nil || res.Resources == nil || len(res.Resources) != 0 {
		t.Fatalf("empty directory: %+v %v", res, err)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "skill://s/empty.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if c := rr.Contents[0]; c.Text != "" || len(c.Blob) != 0 || c.Blob == nil {
		t.Errorf("empty file contents %+v, want an empty blob", c)
	}
	if f := set.files["skill://s/empty.txt"].file; f.Size != 0 || f.Digest != sha256Digest(nil) {
		t.Errorf("empty file entry %+v", f)
	}
}

func TestServeBinaryFile(t *testing.T) {
	dir := t.TempDir()
	goodSkill(t, dir, "s")
	bin := "\x89PNG\r\n\x1a\n\x00\xff\xfe"
	writeFile(t, dir, "s/logo.png", bin)
	set, _, _ := loadQuiet(t, dir)
	cs := connect(t, newTestServer(t, set, RegisterOptions{}), "")
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "skill://s/logo.png"})
	if err != nil {
		t.Fatal(err)
	}
	if c := rr.Contents[0]; string(c.Blob) != bin || c.Text != "" || c.MIMEType != "image/png" {
		t.Errorf("binary contents %+v", c)
	}
}

func TestServePagination(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a", "b", "c/d", "e"} {
		goodSkill(t, dir, p)
	}
	set, _, _ := loadQuiet(t, dir)
	cs := connect(t, newTestServer(t, set, RegisterOptions{PageSize: 2}), "")
	ctx := context.Background()
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		res, err := mcp.CallCustomMethod[*ListParams, *ListResult](ctx, cs, MethodList, &ListParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Skills) > 2 {
			t.Fatalf("page of %d", len(res.Skills))
		}
		for _, e := range res.Skills {
			all = append(all, e.URI)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	if !slices.Equal(all, set.URIs()) {
		t.Fatalf("paged URIs %v, want %v", all, set.URIs())
	}
	for _, bad := range []string{"!!", encodeCursor("skill://zzz/SKILL.md"), "c2tpbGxzLnYyOng"} {
		_, err := mcp.CallCustomMethod[*ListParams, *ListResult](ctx, cs, MethodList, &ListParams{Cursor: bad})
		if rpcError(t, err).Code != jsonrpc.CodeInvalidParams {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
}

// Legacy (initialize-based) sessions get the same extension methods.
func TestServeLegacySession(t *testing.T) {
	set, cs := fixtureSession(t, "2025-11-25")
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s", v)
	}
	res, err := mcp.CallCustomMethod[*ListParams, *ListResult](context.Background(), cs, MethodList, &ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skills) != set.Len() || res.ResultType != "complete" {
		t.Fatalf("legacy skills/list: %+v", res)
	}
}

// The wire shape of the custom results, checked on raw JSON-RPC so that
// zero values cannot hide behind Go decoding: resultType, ttlMs and
// cacheScope are present, skills is an array even when empty.
func TestServeWireShape(t *testing.T) {
	ctx := context.Background()
	s := newTestServer(t, newSetForTest(t), RegisterOptions{})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	call := func(id int, method, params string) map[string]any {
		t.Helper()
		rid, _ := jsonrpc.MakeID(float64(id))
		if err := conn.Write(ctx, &jsonrpc.Request{ID: rid, Method: method, Params: json.RawMessage(params)}); err != nil {
			t.Fatal(err)
		}
		msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		resp := msg.(*jsonrpc.Response)
		if resp.Error != nil {
			t.Fatalf("%s: %v", method, resp.Error)
		}
		var m map[string]any
		if err := json.Unmarshal(resp.Result, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	list := call(1, MethodList, `{`+meta+`}`)
	if list["resultType"] != "complete" || list["ttlMs"] != float64(0) || list["cacheScope"] != "public" {
		t.Errorf("skills/list envelope %v", list)
	}
	if skills, ok := list["skills"].([]any); !ok || len(skills) != 0 {
		t.Errorf("skills = %#v, want []", list["skills"])
	}
	if _, ok := list["nextCursor"]; ok {
		t.Error("nextCursor present on the last page")
	}
	// Absent params are allowed for skills/list.
	rid, _ := jsonrpc.MakeID(float64(2))
	if err := conn.Write(ctx, &jsonrpc.Request{ID: rid, Method: MethodList}); err != nil {
		t.Fatal(err)
	}
	if msg, err := conn.Read(ctx); err != nil || msg.(*jsonrpc.Response).Error != nil {
		t.Errorf("skills/list without params: %v %v", msg, err)
	}
}

func newSetForTest(t *testing.T) *Set {
	t.Helper()
	set, _, err := Load(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestRegisterRejectsBadOptions(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil)
	for _, opts := range []RegisterOptions{{TTL: -time.Second}, {PageSize: -1}} {
		if err := Register(s, nil, opts); !errors.Is(err, ErrRegister) {
			t.Errorf("Register(%+v) = %v, want ErrRegister", opts, err)
		}
	}
	if err := Register(nil, nil, RegisterOptions{}); !errors.Is(err, ErrRegister) {
		t.Errorf("Register(nil server) = %v", err)
	}
	// A nil set still answers the methods, with nothing.
	cs := connect(t, func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil)
		if err := Register(s, nil, RegisterOptions{}); err != nil {
			t.Fatal(err)
		}
		return s
	}(), "")
	res, err := mcp.CallCustomMethod[*ListParams, *ListResult](context.Background(), cs, MethodList, &ListParams{})
	if err != nil || len(res.Skills) != 0 {
		t.Fatalf("nil set: %+v %v", res, err)
	}
}

// The allowed-tools skill adds no tool and no resource to the server.
func TestServeGrantsNoTools(t *testing.T) {
	_, cs := fixtureSession(t, "")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 0 {
		t.Errorf("tools registered: %v", tools.Tools)
	}
}
