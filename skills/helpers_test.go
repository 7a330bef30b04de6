package skills

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fixtureDir is the committed fixture folder; see testdata/fixture/README.md.
const fixtureDir = "testdata/fixture"

// writeFile writes content at dir/rel, creating parent folders.
func writeFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// skillMD renders a SKILL.md with the given frontmatter lines and body.
func skillMD(frontmatter, body string) string {
	return "---\n" + strings.TrimSpace(frontmatter) + "\n---\n\n" + body + "\n"
}

// goodSkill writes a minimal valid skill at dir/skillPath.
func goodSkill(t *testing.T, dir, skillPath string) {
	t.Helper()
	name := skillPath[strings.LastIndexByte(skillPath, '/')+1:]
	writeFile(t, dir, skillPath+"/SKILL.md", skillMD("name: "+name+"\ndescription: A test skill.", "# "+name))
}

// loadQuiet loads dir with a logger writing to a buffer it returns.
func loadQuiet(t *testing.T, dir string) (*Set, []Refusal, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	set, refusals, err := Load(dir, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	return set, refusals, &logs
}

// refusalFor returns the refusal of skill, failing the test if there is none.
func refusalFor(t *testing.T, refusals []Refusal, skill string) Refusal {
	t.Helper()
	for _, r := range refusals {
		if r.Skill == skill {
			return r
		}
	}
	t.Fatalf("no refusal for %q; refusals: %+v", skill, refusals)
	return Refusal{}
}

// sha256Digest computes a digest independently of the package under test.
func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// diskFiles lists the non-hidden regular files under dir/skillPath,
// relative to the skill folder, sorted — an independent view of what a
// skill's resources must contain.
func diskFiles(t *testing.T, dir, skillPath string) []string {
	t.Helper()
	root := filepath.Join(dir, filepath.FromSlash(skillPath))
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// assertRefused checks that exactly skill is refused under rule, via both
// the Rule field and errors.Is on the sentinel, and that nothing is served.
func assertRefused(t *testing.T, dir, skill, rule string) Refusal {
	t.Helper()
	set, refusals, _ := loadQuiet(t, dir)
	r := refusalFor(t, refusals, skill)
	if r.Rule != rule {
		t.Fatalf("%s refused under rule %q (%s), want %q", skill, r.Rule, r.Detail, rule)
	}
	if !errors.Is(r, ruleErrors[rule]) {
		t.Fatalf("errors.Is(refusal, sentinel of %q) = false", rule)
	}
	if set.Len() != 0 {
		t.Fatalf("refused skill served: %v", set.URIs())
	}
	return r
}
