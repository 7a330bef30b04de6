package mcpadapter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/skills"
)

func writeSkill(t *testing.T, root, name, extra string) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := "---\nname: " + name + "\ndescription: How to work " + name + " tasks.\n" + extra + "---\n\n# " + name + "\n\nClaim, heartbeat, complete.\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func skillsFixture(t *testing.T, dir string) fixtureOpt {
	t.Helper()
	set, _, err := skills.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) {
		c.Surface = manifest.NewSurface(manifest.Options{SkillsLoaded: true, SkillURIs: set.URIs()})
		c.Skills = set
	}
}

func TestSkillsServedAndPrivateOnesInvisible(t *testing.T) {
	public := t.TempDir()
	writeSkill(t, public, "graph-worker", "metadata:\n  version: \"1.0.0\"\n")
	withPrivate := t.TempDir()
	writeSkill(t, withPrivate, "graph-worker", "metadata:\n  version: \"1.0.0\"\n")
	writeSkill(t, withPrivate, "secret-sauce", "metadata:\n  private: true\n")
	writeSkill(t, withPrivate, "tool-hungry", "allowed-tools: graph_task_force\n")

	a := newFixture(t, skillsFixture(t, public))
	b := newFixture(t, skillsFixture(t, withPrivate))
	if a.srv.Manifest().SHA256() != b.srv.Manifest().SHA256() {
		t.Fatal("private or refused skills moved the manifest digest")
	}
	if !strings.Contains(string(a.srv.Manifest().Bytes()), `"skillUris":["skill://graph-worker/SKILL.md"]`) ||
		!strings.Contains(string(a.srv.Manifest().Bytes()), `"skillsExtension":true`) {
		t.Fatalf("manifest: %s", a.srv.Manifest().Bytes())
	}
	r := b.raw()
	list := mustResult(t, r.modernCall(skills.MethodList, nil, nil))
	if got := len(list["skills"].([]any)); got != 1 {
		t.Fatalf("skills/list shows %d skills: %v", got, list)
	}
	unknown := wantCode(t, r.modernCall("resources/read", map[string]any{"uri": "skill://does-not-exist/SKILL.md"}, nil), -32602)
	private := wantCode(t, r.modernCall("resources/read", map[string]any{"uri": "skill://secret-sauce/SKILL.md"}, nil), -32602)
	if strings.ReplaceAll(private.Message, "secret-sauce", "X") != strings.ReplaceAll(unknown.Message, "does-not-exist", "X") {
		t.Errorf("a private skill is distinguishable: %q vs %q", private.Message, unknown.Message)
	}
	wantCode(t, r.modernCall(skills.MethodGet, map[string]any{"uri": "skill://secret-sauce/SKILL.md"}, nil), -32602)
	// A skill that asks for tools changes nothing in tools/list.
	ta := mustResult(t, a.raw().modernCall("tools/list", nil, nil))
	tb := mustResult(t, r.modernCall("tools/list", nil, nil))
	if len(ta["tools"].([]any)) != 7 || len(tb["tools"].([]any)) != 7 {
		t.Fatal("skills changed tools/list")
	}
	disc := mustResult(t, r.modernCall("server/discover", nil, nil))
	if !strings.Contains(disc["instructions"].(string), "skill://graph-worker/SKILL.md") {
		t.Errorf("instructions do not point at the skills: %v", disc["instructions"])
	}
}

func TestSkillsOffWithProfile(t *testing.T) {
	dir := t.TempDir()
	writeSkill(t, dir, "graph-worker", "")
	set, _, err := skills.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"skills":false}`, `{"resources":false}`} {
		p, err := manifest.ParseProfile([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		surface := manifest.NewSurface(manifest.Options{Profile: &p, SkillsLoaded: true, SkillURIs: set.URIs()})
		f := newFixture(t, func(c *Config) { c.Surface, c.Skills = surface, set })
		r := f.raw()
		wantCode(t, r.modernCall(skills.MethodList, nil, nil), -32601)
		if _, ok := f.client("", nil).InitializeResult().Capabilities.Extensions[manifest.SkillsExtension]; ok {
			t.Errorf("%s: skills extension advertised", body)
		}
		if strings.Contains(string(f.srv.Manifest().Bytes()), "skill://") {
			t.Errorf("%s: manifest lists skills", body)
		}
	}
}
