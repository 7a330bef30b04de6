package mcpadapter

import (
	"encoding/json"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// documentedLimit is one limit of the manifest as MCP.md must show it: its
// name in backticks, and each value, nested ones as "`key` value".
type documentedLimit struct {
	name   string
	values []string
}

func limitsOf(t *testing.T, m manifest.Manifest) []documentedLimit {
	t.Helper()
	var doc struct {
		Limits map[string]json.RawMessage `json:"limits"`
	}
	if err := json.Unmarshal(m.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var out []documentedLimit
	for name, raw := range doc.Limits {
		l := documentedLimit{name: name}
		var nested map[string]json.Number
		var s string
		switch {
		case json.Unmarshal(raw, &nested) == nil:
			for k, v := range nested {
				l.values = append(l.values, "`"+k+"` "+v.String())
			}
		case json.Unmarshal(raw, &s) == nil:
			l.values = []string{s}
		default:
			l.values = []string{string(raw)}
		}
		out = append(out, l)
	}
	return out
}
