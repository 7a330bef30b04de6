package main

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
)

// TestUILinkOpensTheView runs serve --http with a token and ui link against
// it: the printed link logs a browser-like client in (cookie) and lands on
// the workflow asked for; without the token ui link fails and says why.
func TestUILinkOpensTheView(t *testing.T) {
	c := startHTTPChild(t, []string{"GRAPH_ENGINEERING_AUTH_TOKEN=" + testToken})
	base := "http://" + c.addr
	if r := runCLI(t, "ui", "link", "--url", base); r.code != 1 || !strings.Contains(r.stderr, "401") {
		t.Fatalf("ui link without a token: %+v", r)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "ui", "link", "--url", base+"/", "--auth-token-file", tokenFile, "--workflow", "wf-1")
	link := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(link, base+liveview.UILoginPath+"?code=") || strings.Contains(r.stdout+r.stderr, testToken) {
		t.Fatalf("ui link: %+v", r)
	}
	var landed string
	client := &http.Client{Jar: &uiJar{}, CheckRedirect: func(req *http.Request, _ []*http.Request) error { landed = req.URL.Path; return nil }}
	resp, err := client.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || landed != "/ui/workflows/wf-1" || !strings.Contains(string(body), `data-page="workflow"`) {
		t.Fatalf("the link landed on %s with %d", landed, resp.StatusCode)
	}
	if r := runCLI(t, "ui", "link", "--url", "ftp://x"); r.code != 2 {
		t.Fatalf("a bad --url: %+v", r)
	}
	if !strings.Contains(c.stderr.String(), `msg="serving the live workflow view"`) {
		t.Fatalf("serve does not log the view:\n%s", c.stderr.String())
	}
}

// uiJar keeps every cookie for every path under /ui.
type uiJar struct{ cs []*http.Cookie }

func (j *uiJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.cs = append(j.cs, cs...) }
func (j *uiJar) Cookies(u *url.URL) []*http.Cookie {
	if strings.HasPrefix(u.Path, "/ui") {
		return j.cs
	}
	return nil
}
