package testwait

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// RunNoLeaks runs m's tests and, when they passed, checks with goleak that
// they left no goroutine running, and returns the exit code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(testwait.RunNoLeaks(m)) }
//
// Goroutines still on their way out (a server shutting down, a connection
// closing) are waited for as long as their number keeps falling; the check
// fails when the same goroutines stayed for a stall (StallFloor), or at the
// binary's deadline. ignore adds goleak options for goroutines that are not
// the package's own; each use must say why in a comment.
func RunNoLeaks(m *testing.M, ignore ...goleak.Option) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := checkLeaks(ignore, StallFloor); err != nil {
		fmt.Fprintf(os.Stderr, "testwait: the tests passed but left goroutines running: %v\n", err)
		return 1
	}
	return 0
}

// checkLeaks calls goleak.Find (which itself retries for about a second)
// until it finds nothing, or until the leftover goroutines stopped ending
// for floor.
func checkLeaks(ignore []goleak.Option, floor time.Duration) error {
	var end time.Time
	if timeout := timeoutFlag(); timeout > 0 {
		end = started.Add(timeout - min(timeout/10, 30*time.Second))
	}
	fewest, lastChange := -1, time.Now()
	for {
		err := goleak.Find(ignore...)
		if err == nil {
			return nil
		}
		n := strings.Count(err.Error(), "Goroutine ")
		if fewest < 0 || n < fewest {
			fewest, lastChange = n, time.Now()
			continue
		}
		if time.Since(lastChange) > floor || (!end.IsZero() && time.Now().After(end)) {
			return err
		}
	}
}
