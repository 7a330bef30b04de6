package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runSkillsCLI runs the command line and returns exit code, stdout, stderr.
func runSkillsCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"graph-engineering-mcp"}, args...), strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

const skillsFixture = "../../skills/testdata/fixture"

func TestSkillsCheckRefusalsExitOne(t *testing.T) {
	code, out, errOut := runSkillsCLI(t, "skills", "check", skillsFixture)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitFailure, errOut)
	}
	for _, want := range []string{
		"served   skill://git-workflow/SKILL.md",
		"private  skill://internal-notes/SKILL.md",
		"refused  tool-hungry\n         grants-authority:",
		"refused  leaky\n         credential: references/setup.md line 4",
		"2 served, 1 private, 5 refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "sha256:") {
		t.Errorf("output has no digests:\n%s", out)
	}
	if !strings.Contains(errOut, "5 refused") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestSkillsCheckCleanFolderExitZero(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hello"), 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: hello\ndescription: Say hello.\nmetadata:\n  private: false\n---\n\nHello.\n"
	if err := os.WriteFile(filepath.Join(dir, "hello", "SKILL.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runSkillsCLI(t, "skills", "check", "--json", dir)
	if code != exitOK {
		t.Fatalf("exit %d; stdout %s stderr %s", code, out, errOut)
	}
	var rep struct {
		Served  int `json:"served"`
		Refused int `json:"refused"`
		Entries []struct {
			URI    string `json:"uri"`
			Status string `json:"status"`
			Files  []struct {
				Digest string `json:"digest"`
				Size   int    `json:"size"`
			} `json:"files"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Served != 1 || rep.Refused != 0 || len(rep.Entries) != 1 || rep.Entries[0].URI != "skill://hello/SKILL.md" ||
		len(rep.Entries[0].Files) != 1 || rep.Entries[0].Files[0].Size != len(md) {
		t.Fatalf("report %+v", rep)
	}
}

func TestSkillsCheckUsage(t *testing.T) {
	for _, args := range [][]string{{"skills", "check"}, {"skills", "check", "a", "b"}, {"skills", "check", "--bogus", "x"}} {
		if code, _, errOut := runSkillsCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errOut)
		}
	}
	if code, _, errOut := runSkillsCLI(t, "skills", "check", filepath.Join(t.TempDir(), "missing")); code != exitFailure || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing folder: exit %d, stderr %q", code, errOut)
	}
}
