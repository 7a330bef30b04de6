//go:build unix

package mcpclient

import (
	"os/exec"
	"syscall"
)

// detachFromTerminalSignals starts the server child in its own process
// group. Ctrl-C in a terminal signals the whole foreground process group; the
// example must keep its server alive while it shuts down cleanly (finishing
// or failing the task in hand), and then ends the server itself by closing
// its stdin.
func detachFromTerminalSignals(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
