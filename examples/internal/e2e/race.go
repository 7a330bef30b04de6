//go:build race

package e2e

// raceEnabled is true when the tests run under -race: the example binaries
// are then built with -race too, so a data race in them fails the test.
const raceEnabled = true
