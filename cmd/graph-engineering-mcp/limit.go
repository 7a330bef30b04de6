package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

func adminLimitCommand() *cli.Command {
	return &cli.Command{
		Name:      "limit",
		Usage:     "show or change the limit of a concurrency key: tasks claimed at once (--max) and claims per interval (--rate)",
		UsageText: "graph-engineering-mcp admin limit KEY [--max N] [--rate N/DURATION | --rate none] --reason TEXT [--yes] [--operator NAME] [--json] [--database PATH]",
		Description: `Tasks created with a concurrency_key are claimed only while their key's
limit allows: at most --max of them claimed at once (0: no cap), and at most N
claims in any DURATION of server time (--rate 60/1m; none: no rate). Without
--max or --rate it shows the key and changes nothing. A flag left out keeps its
value. From the moment this returns every server on the database applies the
new limit to its next claim; claims already granted run on (a lower cap only
stops new claims until enough end). Recorded in the audit chain with the
operator, the reason and the limits before and after.

Example:
   graph-engineering-mcp admin limit openai --max 4 --rate 60/1m --reason "provider quota" --yes`,
		Flags: append(adminFlags(),
			&cli.IntFlag{Name: "max", Usage: fmt.Sprintf("at most `N` of the key's tasks claimed at once (0..%d; 0: no cap)", taskgraph.MaxKeyClaimed)},
			&cli.StringFlag{Name: "rate", Usage: fmt.Sprintf("at most N claims per DURATION of server time (`N/DURATION`, e.g. 10/1s, 60/1m; N at most %d, DURATION 1ms..24h; none: no rate)", taskgraph.MaxKeyRate)},
		),
		Action: adminLimitAction,
	}
}

// parseRate reads --rate: N/DURATION, or none (or 0).
func parseRate(s string) (n int, every time.Duration, err error) {
	s = strings.TrimSpace(s)
	if s == "none" || s == "0" {
		return 0, 0, nil
	}
	num, dur, ok := strings.Cut(s, "/")
	if ok {
		n, err = strconv.Atoi(num)
	}
	if ok && err == nil {
		every, err = time.ParseDuration(dur)
	}
	if !ok || err != nil || n <= 0 || n > taskgraph.MaxKeyRate || every < time.Millisecond || every > taskgraph.MaxKeyRateInterval || every%time.Millisecond != 0 {
		return 0, 0, usagef("--rate must be N/DURATION with N between 1 and %d and DURATION a whole number of milliseconds between 1ms and %s (e.g. 10/1s, 60/1m), or none (got %q)", taskgraph.MaxKeyRate, taskgraph.MaxKeyRateInterval, s)
	}
	return n, every, nil
}

// keyJSON is a concurrency key in --json output.
type keyJSON struct {
	Key             string  `json:"key"`
	MaxClaimed      int     `json:"max_claimed"`
	Rate            int     `json:"rate"`
	RateIntervalMS  int64   `json:"rate_interval_ms"`
	Claimed         int     `json:"claimed"`
	NextClaimableAt *string `json:"next_claimable_at"`
	UpdatedBy       string  `json:"updated_by"`
}

func renderKey(k taskgraph.Key) keyJSON {
	out := keyJSON{Key: k.Key, MaxClaimed: k.Limit.MaxClaimed, Rate: k.Limit.Rate, RateIntervalMS: k.Limit.RateInterval.Milliseconds(), Claimed: k.Claimed, UpdatedBy: k.UpdatedBy}
	if !k.NextClaimableAt.IsZero() {
		s := k.NextClaimableAt.UTC().Format(time.RFC3339Nano)
		out.NextClaimableAt = &s
	}
	return out
}

// limitJSON is the --json output of admin limit.
type limitJSON struct {
	Operation string   `json:"operation"` // "limit", or "show" without --max and --rate
	Operator  string   `json:"operator,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Before    *keyJSON `json:"before"` // null when the key had no row (never named, or pruned idle)
	After     *keyJSON `json:"after,omitempty"`
}

func adminLimitAction(c *cli.Context) error {
	got, help, err := interspersedArgs(c)
	if err != nil {
		return err
	}
	if help {
		return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
	}
	if len(got) != 1 {
		return usagef("%s takes one KEY (got %d argument(s): %q); see --help", commandPath(c), len(got), got)
	}
	key := got[0]
	if !taskgraph.ValidIdentifier(key) {
		return usagef("KEY must match %s (got %q)", taskgraph.IdentifierPattern, key)
	}
	change := c.IsSet("max") || c.IsSet("rate")
	var rate int
	var every time.Duration
	if c.IsSet("rate") {
		if rate, every, err = parseRate(c.String("rate")); err != nil {
			return err
		}
	}
	if c.IsSet("max") && (c.Int("max") < 0 || c.Int("max") > taskgraph.MaxKeyClaimed) {
		return usagef("--max must be between 0 (no cap) and %d (got %d)", taskgraph.MaxKeyClaimed, c.Int("max"))
	}
	var op taskgraph.Operator
	if change {
		if op, err = operatorOf(c, "change a limit"); err != nil {
			return err
		}
	}
	return withOperatorStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		cur, found, err := s.KeyInfo(ctx, key)
		if err != nil {
			return usageIfInvalid(err)
		}
		out := limitJSON{Operation: "show"}
		if found {
			b := renderKey(cur)
			out.Before = &b
		}
		if !change {
			if c.Bool("json") {
				return writeJSON(c.App.Writer, out)
			}
			if !found {
				fmt.Fprintf(c.App.Writer, "concurrency key %s has no limit and nothing claimed (no task or operator named it, or it was pruned while idle)\n", key)
				return nil
			}
			fmt.Fprintln(c.App.Writer, keyText(cur))
			return nil
		}
		limit := cur.Limit
		if c.IsSet("max") {
			limit.MaxClaimed = c.Int("max")
		}
		if c.IsSet("rate") {
			limit.Rate, limit.RateInterval = rate, every
		}
		prompt := fmt.Sprintf(`About to set the limit of concurrency key %s.
  before:   %s (%d claimed now)
  after:    %s
  effect:   applies to the next claim on every server; claims granted run on
  operator: %s
  reason:   %s
`, key, cur.Limit, cur.Claimed, limit, op.Name, op.Reason)
		if err := confirm(c, prompt, "Set the limit"); err != nil {
			return err
		}
		k, err := s.SetKeyLimit(ctx, key, limit, op)
		if err != nil {
			return usageIfInvalid(err)
		}
		if c.Bool("json") {
			a := renderKey(k)
			out.Operation, out.Operator, out.Reason, out.After = "limit", op.Name, op.Reason, &a
			return writeJSON(c.App.Writer, out)
		}
		fmt.Fprintf(c.App.Writer, "set %s; recorded in the history: operator %s, reason %q\n", keyText(k), op.Name, op.Reason)
		return nil
	})
}

// keyText says a key's limit and claims in one line.
func keyText(k taskgraph.Key) string {
	s := fmt.Sprintf("concurrency key %s: %s; %d claimed now", k.Key, k.Limit, k.Claimed)
	if !k.NextClaimableAt.IsZero() {
		s += "; next claimable at " + k.NextClaimableAt.UTC().Format(time.RFC3339Nano)
	}
	return s
}
