package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
)

// authMode names how serve --http authenticates, for the start line.
func authMode(cfg httpConfig) string {
	switch {
	case cfg.opts.Principals != nil:
		return "principals"
	case cfg.opts.AuthToken != "":
		return "token"
	}
	return "none"
}

// reloadOnSIGHUP reloads the auth file into auth on every SIGHUP until the
// returned stop is called. A file that does not parse is refused: the old
// principals stay in force and the log says why (never with a token: the
// file holds only digests, and errors name keys and principals).
func reloadOnSIGHUP(logger *slog.Logger, path string, auth *principal.Authenticator) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-ch:
				ps, err := principal.LoadAuthFile(path)
				if err != nil {
					logger.Warn("SIGHUP: refused to reload the auth file; the principals loaded before stay in force", "file", path, "err", err)
					continue
				}
				auth.Replace(ps)
				logger.Info("SIGHUP: reloaded the auth file", "file", path, "principals", ps.Len())
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
		<-exited
	}
}

// authFileFlag is --file of the auth commands.
func authFileFlag() cli.Flag {
	return &cli.StringFlag{Name: "file", Usage: "the auth `FILE` (JSON, as serve --auth-file reads it)", EnvVars: []string{"GRAPH_ENGINEERING_AUTH_FILE"}}
}

// readAuthFile returns the principals of path, none when it does not exist.
func readAuthFile(path string) (principal.AuthFile, error) {
	var f principal.AuthFile
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return principal.AuthFile{Principals: []principal.Principal{}}, nil
	}
	if err != nil {
		return f, fmt.Errorf("read %s: %w", path, err)
	}
	if _, err := principal.ParseAuthFile(b); err != nil {
		return f, usagef("%s: %v", path, err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, usagef("%s: %v", path, err)
	}
	return f, nil
}

// writeAuthFile writes f to path atomically, readable by its owner only,
// after checking that serve would accept it.
func writeAuthFile(path string, f principal.AuthFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := principal.ParseAuthFile(b); err != nil {
		return usagef("%v", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".auth-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// splitList splits comma-separated, possibly repeated flag values.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// newToken returns a fresh random bearer token: 32 random bytes in hex.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "gem_" + hex.EncodeToString(b), nil
}

func init() {
	registerCommands(func() []*cli.Command {
		return []*cli.Command{{
			Name:  "auth",
			Usage: "manage the principals of an auth file (serve --http --auth-file)",
			UsageText: `graph-engineering-mcp auth add NAME --roles ROLE[,ROLE] [--workflows GLOB,...] [--owners GLOB,...] --file FILE
graph-engineering-mcp auth list --file FILE
graph-engineering-mcp auth remove NAME --file FILE

add prints the new principal's token once on stdout and stores only its SHA-256.
A running server picks up the change on SIGHUP.`,
			Action:      groupAction,
			Subcommands: []*cli.Command{authAddCommand(), authListCommand(), authRemoveCommand()},
		}}
	})
}

func authAddCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "add a principal and print its fresh token once",
		UsageText: "graph-engineering-mcp auth add NAME --roles ROLE[,ROLE] [--workflows GLOB,...] [--owners GLOB,...] --file FILE",
		Flags: []cli.Flag{
			authFileFlag(),
			&cli.StringSliceFlag{Name: "roles", Usage: "the principal's `ROLES`: submit, work, observe and/or approve (comma-separated or repeated)"},
			&cli.StringSliceFlag{Name: "workflows", Usage: "glob `PATTERNS` of the workflows it may touch (default: every workflow)"},
			&cli.StringSliceFlag{Name: "owners", Usage: "glob `PATTERNS` a worker's owner must match (default: NAME, NAME/* or NAME:*)"},
		},
		Action: leafAction([]string{"NAME"}, func(c *cli.Context, args []string) error {
			path, name := c.String("file"), args[0]
			if path == "" {
				return usagef("auth add needs --file FILE")
			}
			if len(splitList(c.StringSlice("roles"))) == 0 {
				return usagef("auth add needs --roles: one or more of %s", strings.Join(principal.AllRoles, ", "))
			}
			f, err := readAuthFile(path)
			if err != nil {
				return err
			}
			if slices.ContainsFunc(f.Principals, func(p principal.Principal) bool { return p.Name == name }) {
				return usagef("auth add: principal %q is already in %s; remove it first to replace its token", name, path)
			}
			token, err := newToken()
			if err != nil {
				return err
			}
			f.Principals = append(f.Principals, principal.Principal{
				Name: name, TokenSHA256: principal.TokenDigest(token), Roles: splitList(c.StringSlice("roles")),
				Workflows: splitList(c.StringSlice("workflows")), Owners: splitList(c.StringSlice("owners")),
			})
			if err := writeAuthFile(path, f); err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, token)
			fmt.Fprintf(c.App.ErrWriter, "added principal %q to %s; the token above is shown only this once (the file keeps its SHA-256); send SIGHUP to a running server to load it\n", name, path)
			return nil
		}),
	}
}

func authListCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list the principals of an auth file",
		UsageText: "graph-engineering-mcp auth list --file FILE",
		Flags:     []cli.Flag{authFileFlag()},
		Action: leafAction(nil, func(c *cli.Context, _ []string) error {
			if c.String("file") == "" {
				return usagef("auth list needs --file FILE")
			}
			f, err := readAuthFile(c.String("file"))
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLES\tWORKFLOWS\tOWNERS")
			for _, p := range f.Principals {
				wf, ow := strings.Join(p.Workflows, ","), strings.Join(p.Owners, ",")
				if wf == "" {
					wf = "*"
				}
				if ow == "" {
					ow = p.Name + "," + p.Name + "/*," + p.Name + ":*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, strings.Join(p.Roles, ","), wf, ow)
			}
			return tw.Flush()
		}),
	}
}

func authRemoveCommand() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "remove a principal (its token stops working at the next SIGHUP)",
		UsageText: "graph-engineering-mcp auth remove NAME --file FILE",
		Flags:     []cli.Flag{authFileFlag()},
		Action: leafAction([]string{"NAME"}, func(c *cli.Context, args []string) error {
			path, name := c.String("file"), args[0]
			if path == "" {
				return usagef("auth remove needs --file FILE")
			}
			f, err := readAuthFile(path)
			if err != nil {
				return err
			}
			n := len(f.Principals)
			f.Principals = slices.DeleteFunc(f.Principals, func(p principal.Principal) bool { return p.Name == name })
			if len(f.Principals) == n {
				return usagef("auth remove: no principal %q in %s", name, path)
			}
			if err := writeAuthFile(path, f); err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "removed principal %q from %s; send SIGHUP to a running server to revoke its token\n", name, path)
			return nil
		}),
	}
}
