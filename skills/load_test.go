package skills

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestLoadFixture(t *testing.T) {
	set, refusals, logs := loadQuiet(t, fixtureDir)

	wantURIs := []string{"skill://acme/billing/refunds/SKILL.md", "skill://git-workflow/SKILL.md"}
	if got := set.URIs(); !slices.Equal(got, wantURIs) {
		t.Fatalf("URIs() = %v, want %v", got, wantURIs)
	}

	wantRules := map[string]error{
		"leaky":              ErrCredential,
		"intranet-dashboard": ErrInternalHost,
		"oversized":          ErrTooLarge,
		"misnamed":           ErrNameMismatch,
		"tool-hungry":        ErrGrantsAuthority,
	}
	if len(refusals) != len(wantRules) {
		t.Fatalf("got %d refusals, want %d: %+v", len(refusals), len(wantRules), refusals)
	}
	for skill, sentinel := range wantRules {
		r := refusalFor(t, refusals, skill)
		if !errors.Is(r, sentinel) {
			t.Errorf("refusal of %s = %v, want it to match %v", skill, r, sentinel)
		}
		// The warning names the skill and the rule.
		if !strings.Contains(logs.String(), `"skill":"`+skill+`","rule":"`+r.Rule+`"`) {
			t.Errorf("no warning naming %s and rule %s in logs:\n%s", skill, r.Rule, logs)
		}
	}
	// The secret is named by kind and line, never repeated.
	if r := refusalFor(t, refusals, "leaky"); !strings.Contains(r.Detail, "references/setup.md line 4") {
		t.Errorf("leaky detail = %q, want the file and line", r.Detail)
	}
	if strings.Contains(logs.String(), "fixture0notreal0value") {
		t.Error("logs repeat the secret value")
	}
	// The private skill is neither served nor refused.
	if _, ok := set.Lookup("skill://internal-notes/SKILL.md"); ok {
		t.Error("private skill is in the set")
	}
	for _, r := range refusals {
		if r.Skill == "internal-notes" {
			t.Errorf("private skill reported as refused: %+v", r)
		}
	}

	for _, sk := range set.Skills() {
		// Complete: exactly the non-hidden files on disk, SKILL.md first.
		var got []string
		for _, f := range sk.Files {
			got = append(got, f.Path)
		}
		if got[0] != SkillFile {
			t.Errorf("%s: first file %q, want SKILL.md", sk.Path, got[0])
		}
		slices.Sort(got)
		if want := diskFiles(t, fixtureDir, sk.Path); !slices.Equal(got, want) {
			t.Errorf("%s files = %v, want %v", sk.Path, got, want)
		}
		// Digests and sizes recomputed from disk.
		for _, f := range sk.Files {
			data, err := os.ReadFile(filepath.Join(fixtureDir, sk.Path, f.Path))
			if err != nil {
				t.Fatal(err)
			}
			if f.Digest != sha256Digest(data) || f.Size != int64(len(data)) {
				t.Errorf("%s: digest %s size %d, want %s %d", f.URI, f.Digest, f.Size, sha256Digest(data), len(data))
			}
			if f.URI != "skill://"+sk.Path+"/"+f.Path {
				t.Errorf("file URI %q", f.URI)
			}
		}
	}

	gw, ok := set.Lookup("skill://git-workflow/SKILL.md")
	if !ok {
		t.Fatal("git-workflow missing")
	}
	wantMeta := Metadata{
		Version:      "1.2.0",
		Provenance:   &Provenance{Source: "https://github.com/graph-engineering/skills", Revision: "3f2c1a9"},
		Requirements: "git 2.40 or later",
	}
	if !reflect.DeepEqual(gw.Metadata, wantMeta) {
		t.Errorf("metadata = %+v, want %+v", gw.Metadata, wantMeta)
	}
	var fm map[string]any
	if err := json.Unmarshal(gw.Frontmatter, &fm); err != nil {
		t.Fatal(err)
	}
	wantFM := map[string]any{
		"name":        "git-workflow",
		"description": "Follow this team's Git conventions for branching, commits and pull requests.",
		"license":     "Apache-2.0",
		"metadata": map[string]any{
			"version":      "1.2.0",
			"provenance":   map[string]any{"source": "https://github.com/graph-engineering/skills", "revision": "3f2c1a9"},
			"requirements": "git 2.40 or later",
		},
	}
	if !reflect.DeepEqual(fm, wantFM) {
		t.Errorf("frontmatter = %v, want %v", fm, wantFM)
	}
	for _, f := range gw.Files {
		want := map[string]string{"SKILL.md": "text/markdown", "references/branching.md": "text/markdown", "scripts/check.sh": "text/x-shellscript"}[f.Path]
		if f.MIMEType != want || !f.Text {
			t.Errorf("%s: mime %q text %v, want %q text", f.Path, f.MIMEType, f.Text, want)
		}
	}
}

// A skill asking for tools is refused and changes nothing: the set served
// with it present is the set served without it.
func TestLoadAllowedToolsChangesNothing(t *testing.T) {
	with, _, _ := loadQuiet(t, fixtureDir)

	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixtureDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "tool-hungry")); err != nil {
		t.Fatal(err)
	}
	without, refusals, _ := loadQuiet(t, dir)
	for _, r := range refusals {
		if r.Skill == "tool-hungry" {
			t.Fatal("tool-hungry still refused after removal")
		}
	}
	if !reflect.DeepEqual(with.Skills(), without.Skills()) {
		t.Errorf("served skills differ with and without the tool-hungry skill")
	}
	if !reflect.DeepEqual(with.dirs, without.dirs) || !slices.Equal(with.fileURIs(), without.fileURIs()) {
		t.Errorf("served files or directories differ with and without the tool-hungry skill")
	}
}

func TestLoadFrontmatterRules(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name    string
		content string
		rule    string // "" means served
	}{
		{"minimal", skillMD("name: s\ndescription: d", "body"), ""},
		{"all allowed keys", skillMD("name: s\ndescription: d\nlicense: MIT\ncompatibility: needs git\nmetadata:\n  version: \"1\"\n  provenance: https://example.com/repo\n  requirements: none\n  private: \"false\"", "b"), ""},
		{"crlf", "---\r\nname: s\r\ndescription: d\r\n---\r\nbody\r\n", ""},
		{"no opening fence", "name: s\ndescription: d\n", RuleFrontmatter},
		{"bom before fence", "\ufeff" + skillMD("name: s\ndescription: d", ""), RuleFrontmatter},
		{"no closing fence", "---\nname: s\ndescription: d\n", RuleFrontmatter},
		{"empty file", "", RuleFrontmatter},
		{"not a mapping", skillMD("- a\n- b", ""), RuleFrontmatter},
		{"bad yaml", skillMD("name: [unclosed", ""), RuleFrontmatter},
		{"missing name", skillMD("description: d", ""), RuleName},
		{"name not string", skillMD("name: 5\ndescription: d", ""), RuleName},
		{"uppercase name", skillMD("name: S\ndescription: d", ""), RuleName},
		{"description missing", skillMD("name: s", ""), RuleDescription},
		{"description blank", skillMD("name: s\ndescription: '  '", ""), RuleDescription},
		{"description too long", skillMD("name: s\ndescription: "+long(1025), ""), RuleDescription},
		{"description at bound", skillMD("name: s\ndescription: "+long(1024), ""), ""},
		{"unknown key", skillMD("name: s\ndescription: d\nauthor: me", ""), RuleUnknownKey},
		{"unknown metadata key", skillMD("name: s\ndescription: d\nmetadata:\n  owner: me", ""), RuleUnknownKey},
		{"reserved metadata key", skillMD("name: s\ndescription: d\nmetadata:\n  io.modelcontextprotocol/x: y", ""), RuleUnknownKey},
		{"allowed-tools", skillMD("name: s\ndescription: d\nallowed-tools: Bash", ""), RuleGrantsAuthority},
		{"allowedTools camel", skillMD("name: s\ndescription: d\nallowedTools: [Bash]", ""), RuleGrantsAuthority},
		{"tools in metadata", skillMD("name: s\ndescription: d\nmetadata:\n  tools: shell", ""), RuleGrantsAuthority},
		{"hooks", skillMD("name: s\ndescription: d\nhooks:\n  pre: rm -rf /", ""), RuleGrantsAuthority},
		{"private yes", skillMD("name: s\ndescription: d\nmetadata:\n  private: yes", ""), RuleFrontmatter},
		{"private null", skillMD("name: s\ndescription: d\nmetadata:\n  private:", ""), RuleFrontmatter},
		{"version number", skillMD("name: s\ndescription: d\nmetadata:\n  version: 1.0", ""), RuleFrontmatter},
		{"provenance without source", skillMD("name: s\ndescription: d\nmetadata:\n  provenance:\n    revision: abc", ""), RuleFrontmatter},
		{"provenance extra key", skillMD("name: s\ndescription: d\nmetadata:\n  provenance:\n    source: x\n    signed: y", ""), RuleUnknownKey},
		{"metadata not mapping", skillMD("name: s\ndescription: d\nmetadata: [a]", ""), RuleFrontmatter},
		{"license not string", skillMD("name: s\ndescription: d\nlicense: 3", ""), RuleFrontmatter},
		{"compatibility too long", skillMD("name: s\ndescription: d\ncompatibility: "+long(501), ""), RuleFrontmatter},
		{"anchor and alias", skillMD("name: &n s\ndescription: *n", ""), RuleFrontmatter},
		{"merge key", skillMD("name: s\ndescription: d\nmetadata:\n  <<: {version: \"1\"}", ""), RuleFrontmatter},
		{"non-string key", skillMD("name: s\ndescription: d\n1: x", ""), RuleFrontmatter},
		{"duplicate key", skillMD("name: s\nname: s\ndescription: d", ""), RuleFrontmatter},
		{"custom tag", skillMD("name: s\ndescription: !secret d", ""), RuleFrontmatter},
		{"nan", skillMD("name: s\ndescription: d\nlicense: .nan", ""), RuleFrontmatter},
		{"huge int", skillMD("name: s\ndescription: d\nlicense: 123456789012345678901", ""), RuleFrontmatter},
		{"nul byte", "---\nname: s\ndescription: d\n---\n\x00", RuleFrontmatter},
		{"escaped secret in value", skillMD(`name: s`+"\n"+`description: "key \x41KIA`+"EXAMPLEEXAMPLE12"+`"`, ""), RuleCredential},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "s/SKILL.md", tc.content)
			if tc.rule == "" {
				set, refusals, _ := loadQuiet(t, dir)
				if len(refusals) != 0 || set.Len() != 1 {
					t.Fatalf("want served, got refusals %+v", refusals)
				}
				return
			}
			assertRefused(t, dir, "s", tc.rule)
		})
	}
}

func TestLoadNameMustEqualFolder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "alpha/SKILL.md", skillMD("name: beta\ndescription: d", ""))
	r := assertRefused(t, dir, "alpha", RuleNameMismatch)
	if !strings.Contains(r.Detail, `"beta"`) || !strings.Contains(r.Detail, `"alpha"`) {
		t.Errorf("detail %q should name both names", r.Detail)
	}
}

// fakeSecrets are built by concatenation so no literal credential-shaped
// string is committed (GitHub secret scanning would flag it).
func fakeSecrets() map[string]string {
	x := func(n int) string { return strings.Repeat("a1B2", n)[:n] }
	return map[string]string{
		"private key":     "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIE...\n",
		"openssh key":     "-----BEGIN " + "OPENSSH PRIVATE KEY-----",
		"aws key id":      "aws id " + "AKIA" + "EXAMPLEEXAMPLE12",
		"github classic":  "gh" + "p_" + x(36),
		"github pat":      "github" + "_pat_" + x(22) + "_" + x(59),
		"openai":          "OPENAI=" + "sk" + "-proj-" + x(40),
		"anthropic":       "key " + "sk" + "-ant-api03-" + x(40),
		"stripe":          "sk" + "_live_" + x(24),
		"slack":           "xo" + "xb-" + "1234567890-" + x(24),
		"slack webhook":   "https://hooks.slack.com/services/T" + "0000FAKE/B0000FAKE/" + x(24),
		"jwt":             "ey" + "JhbGciOiJIUzI1NiJ9.ey" + "JzdWIiOiIxMjM0NTY3ODkwIn0." + x(43),
		"google":          "AI" + "za" + x(35),
		"bearer":          "Authorization: Bearer " + x(32),
		"password yaml":   "password: hunter2",
		"password quoted": `db_password = "Tr0ub4dor&3"`,
		"secret json":     `{"client_secret": "9f8e7d6c5b4a"}`,
		"api key env":     "API_KEY=abc123def456ghi",
		"token colon":     "token: 0a1b2c3d4e5f6a7b",
		"url password":    "postgres://app:" + "s3cret" + "pw@db.example.com/app",
	}
}

func TestLoadRefusesCredentials(t *testing.T) {
	for name, secret := range fakeSecrets() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			goodSkill(t, dir, "s")
			writeFile(t, dir, "s/notes/config.md", "# Config\n\n"+secret+"\n")
			set, refusals, logs := loadQuiet(t, dir)
			r := refusalFor(t, refusals, "s")
			if !errors.Is(r, ErrCredential) || set.Len() != 0 {
				t.Fatalf("refusal %v, served %v; want credential refusal", r, set.URIs())
			}
			if !strings.Contains(r.Detail, "notes/config.md line 3") {
				t.Errorf("detail %q does not name file and line", r.Detail)
			}
			// Neither the detail nor the logs repeat the secret.
			for _, part := range strings.Fields(secret) {
				if len(part) >= 12 && (strings.Contains(r.Detail, part) || strings.Contains(logs.String(), part)) {
					t.Errorf("secret part %q leaked into detail or logs", part)
				}
			}
		})
	}
}

// Documentation that talks about credentials, placeholders and code that
// reads them from elsewhere must not be refused.
func TestLoadCredentialFalsePositives(t *testing.T) {
	docs := []string{
		"Pass the token: the server returns it from /login.",
		"Set the `token:` field to your token.",
		"password: <your password>",
		"api_key: YOUR_API_KEY",
		"api_key: ${API_KEY}",
		`token = os.Getenv("GITHUB_TOKEN")`,
		"password = cfg.Password",
		"secret = clientSecret",
		"max_tokens: 4096",
		"token_count: 12",
		"Authorization: Bearer $TOKEN",
		"Authorization: Bearer YOUR_ACCESS_TOKEN_HERE",
		"password: ********",
		"token: string",
		"secret: required",
		"A token is a credential. Never commit one.",
		"The task-scheduler-component-v2 runs nightly.",
		"sk-learn is not a key",
		"password: example-password",
		`"token": "{{ secrets.TOKEN }}"`,
		"https://user@example.com/repo.git",
		"git clone https://github.com/org/repo",
	}
	for _, doc := range docs {
		t.Run(doc, func(t *testing.T) {
			dir := t.TempDir()
			goodSkill(t, dir, "s")
			writeFile(t, dir, "s/notes.md", doc+"\n")
			set, refusals, _ := loadQuiet(t, dir)
			if len(refusals) != 0 || set.Len() != 1 {
				t.Fatalf("documentation refused: %+v", refusals)
			}
		})
	}
}

func TestLoadRefusesInternalHosts(t *testing.T) {
	refused := []string{
		"http://localhost:8080/api",
		"http://LOCALHOST/",
		"https://127.0.0.1/",
		"http://127.1.2.3:9000",
		"https://10.1.2.3/x",
		"http://172.16.0.1/",
		"http://172.31.255.255/",
		"http://192.168.1.1/admin",
		"http://169.254.169.254/latest/meta-data/",
		"http://100.100.100.200/latest/meta-data/",
		"http://[::1]:80/",
		"http://[fd00::1]/",
		"http://[::ffff:127.0.0.1]/",
		"http://0.0.0.0:8000/",
		"http://2130706433/",
		"http://0x7f.1/",
		"https://db.internal/query",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://printer.local/",
		"https://git.corp/team/repo",
		"http://nas.lan/share",
		"http://app.localhost:3000",
		"https://deploy@build.corp/hooks",
		"grpc://10.0.0.7:50051",
		"connect to 10.0.0.5:5432 with psql",
		"curl localhost:9090/metrics",
	}
	for _, doc := range refused {
		t.Run(doc, func(t *testing.T) {
			dir := t.TempDir()
			goodSkill(t, dir, "s")
			writeFile(t, dir, "s/notes.md", "See\n"+doc+"\n")
			r := assertRefused(t, dir, "s", RuleInternalHost)
			if !strings.Contains(r.Detail, "notes.md line 2") {
				t.Errorf("detail %q does not name file and line", r.Detail)
			}
		})
	}
	allowed := []string{
		"https://example.com/docs",
		"https://8.8.8.8/",
		"http://172.32.0.1/",
		"http://192.169.0.1/",
		"https://localhost.example.com/",
		"https://internal.example.com/",
		"skill://internal-notes/SKILL.md",
		"Release 10.0.0.1 shipped.",
		"mailto:ops@example.com",
		"Listen on port 8080 of your machine.",
	}
	for _, doc := range allowed {
		t.Run(doc, func(t *testing.T) {
			dir := t.TempDir()
			goodSkill(t, dir, "s")
			writeFile(t, dir, "s/notes.md", doc+"\n")
			set, refusals, _ := loadQuiet(t, dir)
			if len(refusals) != 0 || set.Len() != 1 {
				t.Fatalf("public reference refused: %+v", refusals)
			}
		})
	}
}

func TestLoadInternalHostInFrontmatter(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s/SKILL.md", skillMD("name: s\ndescription: d\nmetadata:\n  provenance:\n    source: https://git.corp/skills\n    revision: \"1\"", ""))
	assertRefused(t, dir, "s", RuleInternalHost)
}

func TestLoadBounds(t *testing.T) {
	t.Run("files at bound", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "s")
		for i := 1; i < MaxFilesPerSkill; i++ {
			writeFile(t, dir, fmt.Sprintf("s/f%02d.txt", i), "x")
		}
		if set, refusals, _ := loadQuiet(t, dir); set.Len() != 1 {
			t.Fatalf("refusals %+v", refusals)
		}
	})
	t.Run("too many files", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "s")
		for i := 0; i < MaxFilesPerSkill; i++ {
			writeFile(t, dir, fmt.Sprintf("s/f%02d.txt", i), "x")
		}
		assertRefused(t, dir, "s", RuleTooManyFiles)
	})
	t.Run("hidden files do not count", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "s")
		for i := 0; i < MaxFilesPerSkill; i++ {
			writeFile(t, dir, fmt.Sprintf("s/.h%02d", i), "x")
		}
		writeFile(t, dir, "s/.git/config", "[core]")
		set, refusals, _ := loadQuiet(t, dir)
		if set.Len() != 1 {
			t.Fatalf("refusals %+v", refusals)
		}
		if sk := set.Skills()[0]; len(sk.Files) != 1 {
			t.Fatalf("hidden files served: %+v", sk.Files)
		}
	})
	skillAtSize := func(size int) string {
		head := skillMD("name: s\ndescription: d", "")
		return head + strings.Repeat("x", size-len(head))
	}
	t.Run("SKILL.md at bound", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "s/SKILL.md", skillAtSize(MaxSkillMDBytes))
		if set, refusals, _ := loadQuiet(t, dir); set.Len() != 1 {
			t.Fatalf("refusals %+v", refusals)
		}
	})
	t.Run("SKILL.md over bound", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "s/SKILL.md", skillAtSize(MaxSkillMDBytes+1))
		assertRefused(t, dir, "s", RuleTooLarge)
	})
	t.Run("skill over total bound", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "s")
		writeFile(t, dir, "s/a.bin", strings.Repeat("y", MaxSkillBytes/2))
		writeFile(t, dir, "s/b.bin", strings.Repeat("y", MaxSkillBytes/2))
		r := assertRefused(t, dir, "s", RuleTooLarge)
		if !strings.Contains(r.Detail, "total") {
			t.Errorf("detail %q", r.Detail)
		}
	})
	t.Run("too many skills", func(t *testing.T) {
		dir := t.TempDir()
		for i := 0; i <= MaxSkills; i++ {
			goodSkill(t, dir, fmt.Sprintf("s%03d", i))
		}
		set, refusals, _ := loadQuiet(t, dir)
		if set.Len() != MaxSkills {
			t.Fatalf("served %d, want %d", set.Len(), MaxSkills)
		}
		if len(refusals) != 1 || refusals[0].Skill != fmt.Sprintf("s%03d", MaxSkills) || !errors.Is(refusals[0], ErrTooManySkills) {
			t.Fatalf("refusals %+v", refusals)
		}
	})
	t.Run("one bad skill does not stop the others", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "good")
		writeFile(t, dir, "bad/SKILL.md", skillAtSize(MaxSkillMDBytes+1))
		set, refusals, _ := loadQuiet(t, dir)
		if !slices.Equal(set.URIs(), []string{"skill://good/SKILL.md"}) || len(refusals) != 1 {
			t.Fatalf("served %v refusals %+v", set.URIs(), refusals)
		}
	})
}

func TestLoadSymlinksAndSpecialFiles(t *testing.T) {
	t.Run("symlinked file", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "s")
		outside := filepath.Join(t.TempDir(), "passwd")
		writeFile(t, filepath.Dir(outside), "passwd", "root:x:0:0")
		if err := os.Symlink(outside, filepath.Join(dir, "s", "passwd")); err != nil {
			t.Fatal(err)
		}
		r := assertRefused(t, dir, "s", RuleSymlink)
		if !strings.Contains(r.Detail, "passwd") {
			t.Errorf("detail %q", r.Detail)
		}
	})
	t.Run("symlinked SKILL.md", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "real")
		writeFile(t, dir, "s/other.md", "x")
		if err := os.Symlink(filepath.Join(dir, "real", "SKILL.md"), filepath.Join(dir, "s", "SKILL.md")); err != nil {
			t.Fatal(err)
		}
		_, refusals, _ := loadQuiet(t, dir)
		if r := refusalFor(t, refusals, "s"); r.Rule != RuleSymlink {
			t.Fatalf("refusal %+v", r)
		}
	})
	t.Run("symlinked skill folder", func(t *testing.T) {
		dir := t.TempDir()
		elsewhere := t.TempDir()
		goodSkill(t, elsewhere, "s")
		if err := os.Symlink(filepath.Join(elsewhere, "s"), filepath.Join(dir, "s")); err != nil {
			t.Fatal(err)
		}
		assertRefused(t, dir, "s", RuleSymlink)
	})
	t.Run("fifo", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "s")
		if err := syscall.Mkfifo(filepath.Join(dir, "s", "pipe"), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		assertRefused(t, dir, "s", RuleNotRegular)
	})
	t.Run("unreadable subdirectory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads everything")
		}
		dir := t.TempDir()
		goodSkill(t, dir, "s")
		writeFile(t, dir, "s/locked/a.md", "x")
		if err := os.Chmod(filepath.Join(dir, "s", "locked"), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "s", "locked"), 0o755) })
		assertRefused(t, dir, "s", RuleUnreadable)
	})
}

func TestLoadPaths(t *testing.T) {
	t.Run("file name with a space", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "s")
		writeFile(t, dir, "s/my notes.md", "x")
		assertRefused(t, dir, "s", RulePath)
	})
	t.Run("non-ascii file name", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "s")
		writeFile(t, dir, "s/café.md", "x")
		assertRefused(t, dir, "s", RulePath)
	})
	t.Run("uppercase prefix", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "Acme/s")
		assertRefused(t, dir, "Acme/s", RulePath)
	})
	t.Run("bad folder name", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "Bad_Name/SKILL.md", skillMD("name: Bad_Name\ndescription: d", ""))
		assertRefused(t, dir, "Bad_Name", RuleName)
	})
	t.Run("SKILL.md at the top", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "SKILL.md", skillMD("name: top\ndescription: d", ""))
		goodSkill(t, dir, "s")
		set, refusals, _ := loadQuiet(t, dir)
		if r := refusalFor(t, refusals, "."); r.Rule != RulePath {
			t.Fatalf("refusal %+v", r)
		}
		if set.Len() != 1 {
			t.Fatalf("served %v", set.URIs())
		}
	})
	t.Run("prefix and supporting files", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "team.a/v2/s")
		writeFile(t, dir, "team.a/v2/s/a~b+c@d=e,f-g_h.txt", "x")
		writeFile(t, dir, "team.a/README.md", "outside every skill, not served")
		set, refusals, _ := loadQuiet(t, dir)
		if len(refusals) != 0 {
			t.Fatalf("refusals %+v", refusals)
		}
		if _, ok := set.files["skill://team.a/v2/s/a~b+c@d=e,f-g_h.txt"]; !ok {
			t.Fatalf("files %v", set.fileURIs())
		}
		if len(set.files) != 2 {
			t.Fatalf("a file outside every skill is served: %v", set.fileURIs())
		}
	})
}

func TestLoadNested(t *testing.T) {
	t.Run("nested skills are both served; the parent lists the child's files", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "outer")
		goodSkill(t, dir, "outer/inner")
		writeFile(t, dir, "outer/inner/ref.md", "x")
		set, refusals, _ := loadQuiet(t, dir)
		if len(refusals) != 0 || set.Len() != 2 {
			t.Fatalf("served %v refusals %+v", set.URIs(), refusals)
		}
		outer, _ := set.Lookup("skill://outer/SKILL.md")
		var paths []string
		for _, f := range outer.Files {
			paths = append(paths, f.Path)
		}
		if want := []string{"SKILL.md", "inner/SKILL.md", "inner/ref.md"}; !slices.Equal(paths, want) {
			t.Fatalf("outer files %v, want %v", paths, want)
		}
		// The innermost skill owns a shared file.
		if owner := set.files["skill://outer/inner/SKILL.md"].owner; owner.Path != "outer/inner" {
			t.Fatalf("owner %s", owner.Path)
		}
	})
	t.Run("private nested in public refuses the parent", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "outer")
		writeFile(t, dir, "outer/secret-plan/SKILL.md", skillMD("name: secret-plan\ndescription: d\nmetadata:\n  private: true", ""))
		set, refusals, _ := loadQuiet(t, dir)
		if r := refusalFor(t, refusals, "outer"); !errors.Is(r, ErrNestedPrivate) {
			t.Fatalf("refusal %+v", r)
		}
		if set.Len() != 0 || len(set.files) != 0 {
			t.Fatalf("served %v", set.fileURIs())
		}
	})
	t.Run("refused nested refuses the parent", func(t *testing.T) {
		dir := t.TempDir()
		goodSkill(t, dir, "outer")
		writeFile(t, dir, "outer/inner/SKILL.md", skillMD("name: wrong\ndescription: d", ""))
		set, refusals, _ := loadQuiet(t, dir)
		if r := refusalFor(t, refusals, "outer"); !errors.Is(r, ErrNestedRefused) || !strings.Contains(r.Detail, "outer/inner") {
			t.Fatalf("refusal %+v", r)
		}
		if set.Len() != 0 {
			t.Fatalf("served %v", set.URIs())
		}
	})
	t.Run("public nested in private is served alone", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "outer/SKILL.md", skillMD("name: outer\ndescription: d\nmetadata:\n  private: true", ""))
		writeFile(t, dir, "outer/notes.md", "private notes")
		goodSkill(t, dir, "outer/inner")
		set, refusals, _ := loadQuiet(t, dir)
		if len(refusals) != 0 || !slices.Equal(set.URIs(), []string{"skill://outer/inner/SKILL.md"}) {
			t.Fatalf("served %v refusals %+v", set.URIs(), refusals)
		}
		if _, ok := set.files["skill://outer/notes.md"]; ok {
			t.Fatal("private parent's file served")
		}
	})
}

func TestLoadErrors(t *testing.T) {
	if _, _, err := Load(filepath.Join(t.TempDir(), "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: err = %v, want fs.ErrNotExist", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, filepath.Dir(file), "file", "x")
	if _, _, err := Load(file, nil); err == nil {
		t.Error("Load of a regular file succeeded")
	}
	// An empty folder is an empty set, not an error.
	set, refusals, err := Load(t.TempDir(), nil)
	if err != nil || set.Len() != 0 || len(refusals) != 0 || len(set.URIs()) != 0 {
		t.Errorf("empty folder: %v %v %v", set.URIs(), refusals, err)
	}
}

func TestWalkBound(t *testing.T) {
	dir := t.TempDir()
	goodSkill(t, dir, "a")
	goodSkill(t, dir, "b")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if entries, err := walk(root, 4); err != nil || len(entries) != 4 {
		t.Fatalf("at the bound: %d entries, %v", len(entries), err)
	}
	if _, err := walk(root, 3); !errors.Is(err, ErrTreeTooLarge) {
		t.Fatalf("past the bound: %v, want ErrTreeTooLarge", err)
	}
}

func TestRefusalError(t *testing.T) {
	r := Refusal{Skill: "a/b", Rule: RuleTooManyFiles, Detail: "40 files"}
	if got, want := r.Error(), "skill a/b refused: skill has too many files: 40 files"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var err error = fmt.Errorf("startup: %w", r)
	if !errors.Is(err, ErrTooManyFiles) || errors.Is(err, ErrTooLarge) {
		t.Error("errors.Is does not follow the rule")
	}
	for rule, sentinel := range ruleErrors {
		if !errors.Is(Refusal{Rule: rule}, sentinel) {
			t.Errorf("rule %s does not match its sentinel", rule)
		}
	}
}
