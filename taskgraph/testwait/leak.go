package testwait

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"sync"
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

// abandoned holds the goroutines a test left running on purpose (Abandon).
var abandoned = struct {
	sync.Mutex
	ids map[int]string // goroutine id: why
}{ids: map[int]string{}}

// Goroutines returns the ids of the goroutines running now: take it at the
// start of a test that will leave goroutines running on purpose, and pass
// it to Abandon.
func Goroutines() map[int]bool {
	ids := map[int]bool{}
	for _, id := range goroutineIDs(allStacks()) {
		ids[id] = true
	}
	return ids
}

// Abandon tells RunNoLeaks that the goroutines running now that are not in
// before (see Goroutines) are left running on purpose; why says which and
// why. Call it only from a test that does not run in parallel with others,
// once its other goroutines have all ended.
func Abandon(before map[int]bool, why string) {
	abandoned.Lock()
	defer abandoned.Unlock()
	for _, id := range goroutineIDs(allStacks()) {
		if !before[id] {
			abandoned.ids[id] = why
		}
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

var (
	stackHeader = regexp.MustCompile(`(?m)^goroutine (\d+) \[`)
	leakHeader  = regexp.MustCompile(`Goroutine (\d+) in state`)
)

func goroutineIDs(stacks string) []int {
	var ids []int
	for _, m := range stackHeader.FindAllStringSubmatch(stacks, -1) {
		if id, err := strconv.Atoi(m[1]); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// unexpected returns how many of the goroutines goleak reported in err are
// not abandoned on purpose.
func unexpected(err error) int {
	abandoned.Lock()
	defer abandoned.Unlock()
	n := 0
	for _, m := range leakHeader.FindAllStringSubmatch(err.Error(), -1) {
		if id, convErr := strconv.Atoi(m[1]); convErr != nil || abandoned.ids[id] == "" {
			n++
		}
	}
	return n
}

// checkLeaks calls goleak.Find (which itself retries for about a second)
// until it finds nothing but abandoned goroutines, or until the leftover
// goroutines stopped ending for floor.
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
		n := unexpected(err)
		if n == 0 {
			return nil
		}
		if fewest < 0 || n < fewest {
			fewest, lastChange = n, time.Now()
			continue
		}
		if time.Since(lastChange) > floor || (!end.IsZero() && time.Now().After(end)) {
			return err
		}
	}
}
