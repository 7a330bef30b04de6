package main

import (
	"flag"

	"github.com/urfave/cli/v2"
)

// urfave/cli v2 keeps --help and --version in package variables
// (cli.HelpFlag, cli.VersionFlag) and adds them to every app and command it
// runs; their Apply writes the flag's default into the shared *BoolFlag on
// every run. One process runs one app, so that is harmless there, but two
// apps run at once (the tests run the CLI in parallel) race on it. So the
// two flags are replaced, once, by flags whose Apply only defines the flag
// in the run's own FlagSet and writes nothing shared.
func init() {
	cli.HelpFlag = readOnlyBoolFlag{cli.HelpFlag.(*cli.BoolFlag)}
	cli.VersionFlag = readOnlyBoolFlag{cli.VersionFlag.(*cli.BoolFlag)}
}

// readOnlyBoolFlag is a boolean flag without a value source of its own (no
// environment variable, no file), whose Apply never writes to the flag.
type readOnlyBoolFlag struct{ *cli.BoolFlag }

// Apply defines the flag and its aliases, false by default, in set.
func (f readOnlyBoolFlag) Apply(set *flag.FlagSet) error {
	for _, name := range f.Names() {
		set.Bool(name, false, f.Usage)
	}
	return nil
}
