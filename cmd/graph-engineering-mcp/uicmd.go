package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/httpfront"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
)

// uiLinkTimeout bounds the login-code request of ui link.
const uiLinkTimeout = 10 * time.Second

func uiCommand() *cli.Command {
	return &cli.Command{
		Name:  "ui",
		Usage: "open the read-only live workflow view of a running serve --http",
		Description: `The view is served at /ui/ by serve --http (unless --disable-ui). A browser
cannot send a bearer token, so ui link mints a one-time login code with your
token and prints a link that sets a session cookie (see MCP.md, "Live
workflow view").`,
		Subcommands: []*cli.Command{uiLinkCommand()},
		Action:      groupAction,
	}
}

func uiLinkCommand() *cli.Command {
	return &cli.Command{
		Name:      "link",
		Usage:     "print a one-time login link to the live workflow view",
		UsageText: "graph-engineering-mcp ui link [--url URL] [--workflow WORKFLOW_ID] [--auth-token-file FILE]",
		Description: `Asks the server at --url for a one-time login code (POST /ui/login-codes with
the bearer token of GRAPH_ENGINEERING_AUTH_TOKEN or --auth-token-file: the
server's token, or a principal's with the observe role) and prints the link.
Open it within a minute; it works once, and the browser session it starts
lasts 12 hours. A server without authentication (loopback) needs no token:
the link then just opens the view.

Example:
   GRAPH_ENGINEERING_AUTH_TOKEN_FILE=~/.config/mcp-token graph-engineering-mcp ui link --url http://127.0.0.1:7330`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Value: "http://" + httpfront.DefaultHTTPAddr, Usage: "the server's base `URL` (scheme://host:port, as served by serve --http)", EnvVars: []string{"GRAPH_ENGINEERING_URL"}},
			&cli.StringFlag{Name: "workflow", Usage: "land on the DAG of workflow `ID` instead of the list"},
			&cli.StringFlag{Name: "auth-token", Usage: "bearer `TOKEN`; prefer the environment variable or --auth-token-file", EnvVars: []string{"GRAPH_ENGINEERING_AUTH_TOKEN"}},
			&cli.StringFlag{Name: "auth-token-file", Usage: "read the bearer token from `FILE`", EnvVars: []string{"GRAPH_ENGINEERING_AUTH_TOKEN_FILE"}},
		},
		Action: uiLinkAction,
	}
}

func uiLinkAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("ui link takes no arguments (got %q)", c.Args().First())
	}
	base, err := url.Parse(strings.TrimRight(c.String("url"), "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.Path != "" || base.RawQuery != "" || base.User != nil {
		return usagef("--url must be the server's base URL, scheme://host:port with scheme http or https and no path (got %q)", c.String("url"))
	}
	token := c.String("auth-token")
	if file := c.String("auth-token-file"); file != "" {
		if token != "" {
			return usagef("set the auth token once: --auth-token (GRAPH_ENGINEERING_AUTH_TOKEN) and --auth-token-file (GRAPH_ENGINEERING_AUTH_TOKEN_FILE) are both set")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return usagef("--auth-token-file: %v", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return usagef("--auth-token-file %s is empty", file)
		}
	}
	endpoint := base.String() + liveview.UILoginCodesPath
	if wf := c.String("workflow"); wf != "" {
		endpoint += "?" + url.Values{"next": {liveview.UIPath + "workflows/" + url.PathEscape(wf)}}.Encode()
	}
	ctx, cancel := context.WithTimeout(c.Context, uiLinkTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, nil)
	if err != nil {
		return usagef("--url: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ask %s for a login code: %w", base.Host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		if resp.StatusCode == http.StatusNotFound {
			msg = "the server does not serve the live view (is it serve --http without --disable-ui?)"
		}
		return fmt.Errorf("ask %s for a login code: %s: %s", base.Host, resp.Status, clipLine(msg, 400))
	}
	var lc liveview.UILoginCode
	if err := json.Unmarshal(body, &lc); err != nil || !strings.HasPrefix(lc.Path, liveview.UILoginPath+"?") {
		return fmt.Errorf("ask %s for a login code: the answer is not a login code", base.Host)
	}
	fmt.Fprintln(c.App.Writer, base.String()+lc.Path)
	fmt.Fprintf(c.App.ErrWriter, "open the link within %d s; it works once\n", lc.ExpiresInS)
	return nil
}

// clipLine returns s on one line, at most n bytes.
func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// uiLoginHint is what the serve log says about getting into the view.
func uiLoginHint(cfg httpConfig, addr string) string {
	if cfg.opts.AuthToken == "" && cfg.opts.Principals == nil {
		return "none needed (no authentication on loopback)"
	}
	return "graph-engineering-mcp ui link --url http://" + addr + " (with your token)"
}

func init() {
	registerCommands(func() []*cli.Command { return []*cli.Command{uiCommand()} })
}
