package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchStoreModeVerifiesItself(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"graph-engineering-mcp", "bench", "--tasks", "300", "--workers", "4", "--layers", "3", "--heartbeat", "--sync", "normal", "--json"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("not JSON: %s", stdout.String())
	}
	for _, k := range []string{"mode", "tasks", "workers", "sync", "seconds", "cycles_per_sec", "claim_ms", "complete_ms", "verified_completed_once"} {
		if _, ok := res[k]; !ok {
			t.Errorf("bench --json lacks %q", k)
		}
	}
	if res["mode"] != "store" || res["tasks"] != float64(300) || res["verified_completed_once"] != float64(300) || res["history_verified"] != true {
		t.Fatalf("bench result: %v", res)
	}
	for _, k := range []string{"claim_ms", "complete_ms"} {
		p := res[k].(map[string]any)
		if !(p["p50"].(float64) <= p["p95"].(float64) && p["p95"].(float64) <= p["p99"].(float64)) {
			t.Errorf("%s percentiles out of order: %v", k, p)
		}
	}
}

// The default loop of --mode store completes and claims the next task in
// one call; each task is still completed exactly once.
func TestBenchCombinedLoopVerifiesItself(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"graph-engineering-mcp", "bench", "--tasks", "300", "--workers", "4", "--layers", "3", "--sync", "normal", "--json"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("not JSON: %s", stdout.String())
	}
	if res["loop"] != "combined" || res["verified_completed_once"] != float64(300) || res["history_verified"] != true {
		t.Fatalf("bench result: %v", res)
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--tasks", "0"}, {"--workers", "0"}, {"--mode", "carrier-pigeon"}, {"--sync", "off"}, {"--layers", "-1"},
		{"--loop", "sideways"}, {"--loop", "combined", "--heartbeat"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"graph-engineering-mcp", "bench"}, args...), strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("bench %v: exit %d (%s), want 2", args, code, stderr.String())
		}
	}
}
