package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchHTTPModeVerifiesItself(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"graph-engineering-mcp", "bench", "--mode", "http", "--tasks", "200", "--workers", "4", "--layers", "2", "--heartbeat", "--sync", "normal", "--json"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("not JSON: %s", stdout.String())
	}
	if res["mode"] != "http" || res["verified_completed_once"] != float64(200) || res["history_verified"] != true || res["heartbeat_ms"] == nil {
		t.Fatalf("bench result: %v", res)
	}
}

// Over MCP the combined loop is graph_task_complete with claim_next: every
// task still completed exactly once, through layers whose dependents the
// completions make ready (which claim_next does not take: the next claim
// does).
func TestBenchHTTPCombinedLoopVerifiesItself(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"graph-engineering-mcp", "bench", "--mode", "http", "--tasks", "200", "--workers", "4", "--layers", "2", "--sync", "normal", "--json"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("not JSON: %s", stdout.String())
	}
	if res["mode"] != "http" || res["loop"] != "combined" || res["verified_completed_once"] != float64(200) || res["history_verified"] != true {
		t.Fatalf("bench result: %v", res)
	}
}

// --http-client wire: plain JSON-RPC workers get the same verified result,
// through both loops, with heartbeats, and the result names the client.
func TestBenchHTTPWireClientVerifiesItself(t *testing.T) {
	t.Parallel()
	for _, extra := range [][]string{{"--heartbeat"}, {}} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"graph-engineering-mcp", "bench", "--mode", "http", "--http-client", "wire", "--tasks", "200", "--workers", "4", "--layers", "2", "--sync", "normal", "--json"}, extra...)
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr.String())
		}
		var res map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("not JSON: %s", stdout.String())
		}
		if res["http_client"] != "wire" || res["verified_completed_once"] != float64(200) || res["history_verified"] != true {
			t.Fatalf("%v: bench result: %v", extra, res)
		}
	}
}
