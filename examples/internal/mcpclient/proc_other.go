//go:build !unix

package mcpclient

import "os/exec"

// detachFromTerminalSignals does nothing where process groups do not exist.
func detachFromTerminalSignals(*exec.Cmd) {}
