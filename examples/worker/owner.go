package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// ownerPattern is the server's identifier rule for owner (MCP.md §3).
var ownerPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// checkOwner validates an --owner value.
func checkOwner(owner string) error {
	if !ownerPattern.MatchString(owner) {
		return fmt.Errorf("--owner must match %s: a letter or digit, then at most 127 letters, digits, '_', '.', ':' or '-' (got %q)", ownerPattern, owner)
	}
	return nil
}

// defaultOwner is "<hostname>-<pid>" with every character the identifier
// rule does not allow replaced by '-', so that two workers on one machine
// never share an owner name.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return sanitizeOwner(host, os.Getpid())
}

func sanitizeOwner(host string, pid int) string {
	suffix := fmt.Sprintf("-%d", pid)
	var b strings.Builder
	for _, r := range host {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == ':', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := b.String()
	if name == "" || !ownerPattern.MatchString(name[:1]) {
		name = "w" + name
	}
	if max := 128 - len(suffix); len(name) > max {
		name = name[:max]
	}
	return name + suffix
}
