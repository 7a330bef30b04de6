package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

const skillsFixtureDir = "../../skills/testdata/fixture"

func TestServeSkillsOverStdio(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"graph-engineering-mcp", "manifest", "--skills", skillsFixtureDir}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("manifest --skills: exit %d %s", code, stderr.String())
	}
	printed := strings.TrimSuffix(stdout.String(), "\n")
	if !strings.Contains(printed, `"skillUris":["skill://acme/billing/refunds/SKILL.md","skill://git-workflow/SKILL.md"]`) {
		t.Fatalf("manifest skillUris: %s", printed)
	}
	s := startStdio(t, "--skills", skillsFixtureDir)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"graph-engineering://capabilities/manifest",` + modernMetaJSON + `}}`)
	m := s.recv()
	if got := m["result"].(map[string]any)["contents"].([]any)[0].(map[string]any)["text"]; got != printed {
		t.Fatalf("served manifest differs from manifest --skills:\n%s\n%s", got, printed)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"skills/list","params":{` + modernMetaJSON + `}}`)
	m = s.recv()
	list := m["result"].(map[string]any)["skills"].([]any)
	if len(list) != 2 {
		t.Fatalf("skills/list: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"skill://git-workflow/SKILL.md",` + modernMetaJSON + `}}`)
	m = s.recv()
	c := m["result"].(map[string]any)["contents"].([]any)[0].(map[string]any)
	if c["mimeType"] != "text/markdown" || !strings.HasPrefix(c["text"].(string), "---\nname: git-workflow") {
		t.Fatalf("SKILL.md: %v", c)
	}
	s.send(`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"skill://internal-notes/SKILL.md",` + modernMetaJSON + `}}`)
	if m = s.recv(); errCode(m) != -32602 {
		t.Fatalf("private skill: %v", m)
	}
	s.in.Close()
	s.cmd.Wait()
	logs := s.stderr.String()
	for _, want := range []string{"leaky", "intranet-dashboard", "oversized", "misnamed", "tool-hungry"} {
		if !strings.Contains(logs, want) {
			t.Errorf("stderr does not warn about the refused skill %s:\n%s", want, logs)
		}
	}
	// The operator's log may say a private skill was skipped, but never
	// reports it as refused or shows its content.
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "internal-notes") && (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
			t.Errorf("the private skill is reported as a problem: %s", line)
		}
	}
	private, err := os.ReadFile(skillsFixtureDir + "/internal-notes/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	if parts := strings.SplitN(string(private), "---", 3); len(parts) != 3 || strings.Contains(logs, strings.TrimSpace(parts[2])) || strings.Contains(logs, "Notes for operators only") {
		t.Error("the private skill's content appears in the logs (or the fixture changed shape)")
	}
}

func TestServeRefusesMissingSkillsDir(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"graph-engineering-mcp", "serve", "--database", t.TempDir() + "/x.db", "--skills", t.TempDir() + "/nope"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "--skills") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}
