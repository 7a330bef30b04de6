package skills

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseFrontmatterRendersVerbatimJSON(t *testing.T) {
	src := []byte(`---
name: demo
description: "Quoted: with a colon & <html>"
license: 'MIT'
compatibility: >-
  Needs git
  and make
metadata:
  version: "0.1"
  requirements: |
    one
    two
  private: false
  provenance:
    source: https://example.com/skills
    revision: "0042"
---
# body
`)
	fm, err := parseFrontmatter(src)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(fm.JSON, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"name":          "demo",
		"description":   "Quoted: with a colon & <html>",
		"license":       "MIT",
		"compatibility": "Needs git and make",
		"metadata": map[string]any{
			"version":      "0.1",
			"requirements": "one\ntwo\n",
			"private":      false,
			"provenance":   map[string]any{"source": "https://example.com/skills", "revision": "0042"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("frontmatter JSON = %s\nwant %v", fm.JSON, want)
	}
	if bytes.Contains(fm.JSON, []byte(`\u0026`)) {
		t.Errorf("JSON escapes HTML characters: %s", fm.JSON)
	}
	if fm.Metadata.Provenance.Revision != "0042" || fm.Metadata.Private {
		t.Errorf("metadata = %+v", fm.Metadata)
	}
}

func TestParseFrontmatterScalars(t *testing.T) {
	// An unquoted date stays the text the author wrote: YAML readers
	// disagree on whether it is a date, and the entry must match the file.
	fm, err := parseFrontmatter([]byte("---\nname: n\ndescription: d\nlicense: 2024-01-02\n---\n"))
	if err != nil {
		t.Fatal(err)
	}
	if fm.Fields["license"] != "2024-01-02" {
		t.Errorf("timestamp rendered as %#v, want the text as written", fm.Fields["license"])
	}
	if _, err := parseFrontmatter([]byte("---\nname: n\ndescription: d\nlicense: ~\n---\n")); err == nil {
		t.Error("null license accepted")
	}
}

func TestNameRules(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "git-workflow": true, "pdf2text": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "-a": false, "a-": false, "a--b": false,
		"A": false, "a_b": false, "a.b": false, "é": false, "a b": false,
	} {
		if got := nameProblem(name) == ""; got != ok {
			t.Errorf("nameProblem(%q) ok = %v, want %v", name, got, ok)
		}
	}
}

// FuzzFrontmatter checks that parsing never panics and that whatever it
// accepts satisfies the invariants the server relies on: the JSON is an
// object whose name and description are the validated fields, only allowed
// keys appear, and parsing is deterministic.
func FuzzFrontmatter(f *testing.F) {
	seeds := []string{
		"---\nname: a\ndescription: b\n---\n",
		"---\r\nname: a\r\ndescription: b\r\n---\r\n",
		"---\nname: a\ndescription: b\nmetadata:\n  private: true\n  provenance: {source: x, revision: y}\n---\n",
		"---\nname: &a a\ndescription: *a\n---\n",
		"---\n[1, 2]\n---\n",
		"---\nname: a\n---",
		"---\n---\n",
		"---\nname: a\ndescription: b\nlicense: !!binary aGk=\n---\n",
		"---\nname: a\ndescription: b\nmetadata: {<<: {version: '1'}}\n---\n",
		"---\nname: a\ndescription: b\nmetadata:\n  version: 1e400\n---\n",
		"---\n" + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n---\n",
		"no frontmatter",
		"",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	// The fixture's SKILL.md files are seeds too.
	matches, _ := filepath.Glob(filepath.Join(fixtureDir, "*", "SKILL.md"))
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil && len(b) < 8<<10 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		fm, err := parseFrontmatter(src)
		if err != nil {
			r, ok := err.(*Refusal)
			if !ok || ruleErrors[r.Rule] == nil || r.Detail == "" {
				t.Fatalf("error %#v is not a refusal with a known rule and a detail", err)
			}
			return
		}
		if nameProblem(fm.Name) != "" {
			t.Fatalf("accepted invalid name %q", fm.Name)
		}
		if strings.TrimSpace(fm.Description) == "" || utf8.RuneCountInString(fm.Description) > MaxDescriptionLength {
			t.Fatalf("accepted invalid description %q", fm.Description)
		}
		var obj map[string]any
		if err := json.Unmarshal(fm.JSON, &obj); err != nil {
			t.Fatalf("JSON %s does not decode: %v", fm.JSON, err)
		}
		if obj["name"] != fm.Name || obj["description"] != fm.Description {
			t.Fatalf("JSON %s disagrees with name/description", fm.JSON)
		}
		for k := range obj {
			if !contains(allowedTopKeys, k) {
				t.Fatalf("accepted key %q", k)
			}
		}
		again, err := parseFrontmatter(src)
		if err != nil || !bytes.Equal(again.JSON, fm.JSON) {
			t.Fatalf("parsing is not deterministic")
		}
	})
}
