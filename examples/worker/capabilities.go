package main

import (
	"fmt"
	"regexp"
	"strings"
)

// CapabilitiesEnv supplies --capabilities when the flag is not given.
const CapabilitiesEnv = "GRAPH_WORKER_CAPABILITIES"

// tagRE is the server's rule for a capability tag (MCP.md, capabilities).
var tagRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// parseCapabilities reads a comma-separated list of tags ("" for none),
// refusing what the server would refuse, so a typo fails at start rather
// than on the first claim.
func parseCapabilities(s string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if !tagRE.MatchString(t) {
			return nil, fmt.Errorf("--capabilities: tag %q must match ^[a-z][a-z0-9_.-]{0,63}$ (a lower-case letter, then lower-case letters, digits, '_', '.' or '-')", t)
		}
		out = append(out, t)
	}
	if len(out) > 64 {
		return nil, fmt.Errorf("--capabilities: at most 64 tags (got %d)", len(out))
	}
	return out, nil
}
