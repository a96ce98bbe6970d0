package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// previewHTTP is an HTTP client that sends every *.localhost host to the test hutchd's preview
// listener, as a browser resolves *.localhost to loopback.
func previewHTTP() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, previewAddr)
		},
		MaxIdleConnsPerHost: 256,
	}}
}

// startTarget copies the previewtarget server into sb and starts it as a background process
// listening on addr (inside the sandbox); it returns when the port answers.
func startTarget(t *testing.T, sb *client.Sandbox, id, addr string) *client.Process {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	f, err := os.Open(bins + "/previewtarget")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := sb.WriteFileFrom(ctx, "/usr/local/bin/previewtarget", f); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, "chmod 755 /usr/local/bin/previewtarget", nil); err != nil {
		t.Fatal(err)
	}
	p, err := sb.StartProcess(ctx, "previewtarget -listen "+addr, client.ProcessOptions{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	var pn int
	fmt.Sscan(port, &pn)
	if _, err := p.WaitForPort(ctx, pn, client.PortWaitOptions{Mode: "tcp", Timeout: time.Minute}); err != nil {
		logs, _ := p.Logs(ctx)
		t.Fatalf("previewtarget did not come up: %v (logs %q %q)", err, logs.Stdout, logs.Stderr)
	}
	return p
}

// TestPreviewAcceptance runs acceptance cases P2 and P3 and the preview proxy requirements.
func TestPreviewAcceptance(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-preview", nil)
	hc := previewHTTP()

	t.Run("P2 server on 127.0.0.1 reachable", func(t *testing.T) {
		ctx := ctxT(t, 2*time.Minute)
		p, err := sb.StartProcess(ctx, "python3 -m http.server 5173 --bind 127.0.0.1", client.ProcessOptions{ID: "p2"})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill(ctx, 0)
		if _, err := p.WaitForPort(ctx, 5173, client.PortWaitOptions{Mode: "http", Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
		ep, err := sb.ExposePort(ctx, 5173, client.ExposeOptions{Name: "web"})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("http://5173-e2e-preview-%s.localhost:%s/", ep.Token, previewPort())
		if ep.URL != want || len(ep.Token) != 16 {
			t.Fatalf("ExposePort = %+v; want URL %s and a 16-character token", ep, want)
		}
		resp, err := hc.Get(ep.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("Directory listing")) {
			t.Fatalf("GET %s = %d %q", ep.URL, resp.StatusCode, body[:min(len(body), 200)])
		}
		if err := sb.UnexposePort(ctx, 5173); err != nil {
			t.Fatal(err)
		}
		if st := status(t, hc, ep.URL); st != 404 {
			t.Fatalf("after unexpose: %d; want 404", st)
		}
	})

	target := startTarget(t, sb, "target", "127.0.0.1:8080")
	_ = target
	ctx := ctxT(t, 10*time.Minute)
	ep, err := sb.ExposePort(ctx, 8080, client.ExposeOptions{Token: "e2e_token_1"})
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Replace(ep.URL, "e2e_token_1", "e2e_token_2", 1)

	t.Run("refusals reveal nothing", func(t *testing.T) {
		bad := []string{
			wrong, // wrong token
			strings.Replace(ep.URL, "8080-", "8081-", 1),               // unexposed port
			strings.Replace(ep.URL, "-e2e_token_1", "", 1),             // no token
			strings.Replace(ep.URL, "e2e-preview", "e2e-nosuchbox", 1), // unknown sandbox
			"http://localhost:" + previewPort() + "/",                  // not a preview host
			strings.Replace(ep.URL, "8080-", "99999-", 1),              // bad port
		}
		var first []byte
		for _, u := range bad {
			resp, err := hc.Get(u + "api/ping")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 404 {
				t.Errorf("GET %s = %d; want 404", u, resp.StatusCode)
			}
			var env errdefs.Envelope
			json.Unmarshal(body, &env)
			if env.Code != errdefs.CodeInvalidToken {
				t.Errorf("GET %s body %q; want code INVALID_TOKEN", u, body)
			}
			body = bytes.TrimSpace(stripTimestamp(body))
			if first == nil {
				first = body
			} else if !bytes.Equal(first, body) {
				t.Errorf("refusal bodies differ:\n%s\n%s", first, body)
			}
		}
	})

	t.Run("forwarded headers", func(t *testing.T) {
		resp, err := hc.Get(ep.URL + "headers?x=1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct {
			Host    string
			URI     string
			Headers map[string][]string
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(ep.URL)
		if got.Host != "localhost:8080" || got.URI != "/headers?x=1" {
			t.Errorf("upstream saw host %q uri %q", got.Host, got.URI)
		}
		if h := got.Headers["X-Forwarded-Host"]; len(h) != 1 || h[0] != u.Host {
			t.Errorf("X-Forwarded-Host = %q; want %q", h, u.Host)
		}
		if h := got.Headers["X-Forwarded-Proto"]; len(h) != 1 || h[0] != "http" {
			t.Errorf("X-Forwarded-Proto = %q", h)
		}
	})

	t.Run("P3 WebSocket echo", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		wsURL := strings.Replace(ep.URL, "http://", "ws://", 1) + "ws"
		c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			t.Fatalf("dial %s: %v", wsURL, err)
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		for _, msg := range []string{"hello", strings.Repeat("é", 70000)} {
			if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_, got, err := c.Read(ctx)
			if err != nil || string(got) != msg {
				t.Fatalf("echo = %d bytes, %v; want %d bytes", len(got), err, len(msg))
			}
		}
		c.Close(websocket.StatusNormalClosure, "")
		for _, u := range []string{wrong, strings.Replace(ep.URL, "-e2e_token_1", "", 1)} {
			wu := strings.Replace(u, "http://", "ws://", 1) + "ws"
			_, resp, err := websocket.Dial(ctx, wu, &websocket.DialOptions{HTTPClient: hc})
			if err == nil || resp == nil || resp.StatusCode != 404 {
				t.Fatalf("dial %s: err %v resp %v; want refused with 404", wu, err, resp)
			}
		}
	})

	t.Run("100 MiB response", func(t *testing.T) {
		resp, err := hc.Get(ep.URL + "big?mib=100")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var i int64
		buf := make([]byte, 256<<10)
		for {
			n, err := resp.Body.Read(buf)
			for _, b := range buf[:n] {
				if b != byte(i*7+i>>12) {
					t.Fatalf("byte %d = %d; want %d", i, b, byte(i*7+i>>12))
				}
				i++
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("after %d bytes: %v", i, err)
			}
		}
		if i != 100<<20 {
			t.Fatalf("got %d bytes; want %d", i, 100<<20)
		}
	})

	t.Run("request body streamed in", func(t *testing.T) {
		data := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
		resp, err := hc.Post(ep.URL+"sum", "application/octet-stream", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasSuffix(strings.TrimSpace(string(body)), fmt.Sprint(len(data))) {
			t.Fatalf("POST /sum = %q", body)
		}
	})

	t.Run("SSE arrives as sent", func(t *testing.T) {
		const n, gap = 4, 400 * time.Millisecond
		resp, err := hc.Get(fmt.Sprintf("%ssse?n=%d&gapMs=%d", ep.URL, n, gap.Milliseconds()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var arrivals []time.Time
		for len(arrivals) < n {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("after %d events: %v", len(arrivals), err)
			}
			if strings.HasPrefix(line, "data: ") {
				arrivals = append(arrivals, time.Now())
			}
		}
		// A buffering proxy would deliver all events together at the end.
		if spread := arrivals[n-1].Sub(arrivals[0]); spread < gap*(n-1)/2 {
			t.Fatalf("events arrived within %s of each other; the server sent them %s apart", spread, gap)
		}
	})

	t.Run("200 concurrent requests", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := hc.Get(fmt.Sprintf("%ssmall?i=%d", ep.URL, i))
				if err != nil {
					errs <- err
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "ok" {
					errs <- fmt.Errorf("request %d: %d %q", i, resp.StatusCode, body)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("nothing listening is 502 and never reaches the agent", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		ep2, err := sb.ExposePort(ctx, 3000, client.ExposeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Post(ep2.URL+"api/execute", "application/json", strings.NewReader(`{"command":"touch /tmp/reached-agent"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 502 || !bytes.Contains(body, []byte(errdefs.CodeServiceNotResponding)) {
			t.Fatalf("POST through an idle port = %d %q; want 502 SERVICE_NOT_RESPONDING", resp.StatusCode, body)
		}
		if ok, _ := sb.Exists(ctx, "/tmp/reached-agent"); ok {
			t.Fatal("a preview request ran a command in the agent")
		}
	})

	t.Run("routes again after hutchd restart and wakes a stopped sandbox", func(t *testing.T) {
		ctx := ctxT(t, 3*time.Minute)
		d.Kill9()
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if st := status(t, hc, ep.URL+"small"); st != 200 {
			t.Fatalf("after hutchd restart: %d; want 200", st)
		}
		// A preview request is activity: lastActivityAt moves past the time of the request.
		before := time.Now()
		time.Sleep(20 * time.Millisecond)
		if st := status(t, hc, ep.URL+"small"); st != 200 {
			t.Fatalf("preview request: %d", st)
		}
		if info, err := d.Client().GetSandbox(ctx, "e2e-preview"); err != nil || !info.LastActivityAt.After(before) {
			t.Fatalf("lastActivityAt = %v (err %v); want after %v: a preview request is activity", info.LastActivityAt, err, before)
		}
		if _, err := sb.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		// The preview request starts the sandbox; the server is gone (processes do not survive a
		// stop), so the answer is 502, and the sandbox is running again.
		if st := status(t, hc, ep.URL+"small"); st != 502 {
			t.Fatalf("preview of a stopped sandbox: %d; want 502 from the restarted sandbox", st)
		}
		info, err := sb.Info(ctx)
		if err != nil || info.Status != "running" {
			t.Fatalf("sandbox after a preview request: %+v, %v; want running", info, err)
		}
		startTarget(t, sb, "target-again", "127.0.0.1:8080")
		if st := status(t, hc, ep.URL+"small"); st != 200 {
			t.Fatalf("exposed port after the sandbox restarted: %d; want 200", st)
		}
	})
}

// TestPortsBadInput checks the expose API's validation.
func TestPortsBadInput(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-ports", nil)
	ctx := ctxT(t, time.Minute)
	cases := []struct {
		port  int
		token string
		code  errdefs.Code
	}{
		{80, "", errdefs.CodeInvalidPort},
		{0, "", errdefs.CodeInvalidPort},
		{70000, "", errdefs.CodeInvalidPort},
		{8080, "Bad-Token", errdefs.CodeBadPortToken},
		{8080, "much_too_long_token_x", errdefs.CodeBadPortToken},
		{8080, "short", errdefs.CodeBadPortToken}, // guessable: under 8 characters
	}
	for _, c := range cases {
		if _, err := sb.ExposePort(ctx, c.port, client.ExposeOptions{Token: c.token}); !errdefs.IsCode(err, c.code) {
			t.Errorf("ExposePort(%d, %q) = %v; want %s", c.port, c.token, err, c.code)
		}
	}
	if _, err := sb.ExposePort(ctx, 8080, client.ExposeOptions{Token: "shared_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.ExposePort(ctx, 8081, client.ExposeOptions{Token: "shared_1"}); !errdefs.IsCode(err, errdefs.CodeTokenInUse) {
		t.Errorf("token reuse = %v; want PORT_TOKEN_IN_USE", err)
	}
	if _, err := sb.ExposePort(ctx, 8080, client.ExposeOptions{Token: "other_12"}); !errdefs.IsCode(err, errdefs.CodePortAlreadyExposed) {
		t.Errorf("re-expose with another token = %v; want PORT_ALREADY_EXPOSED", err)
	}
	if again, err := sb.ExposePort(ctx, 8080, client.ExposeOptions{}); err != nil || again.Token != "shared_1" {
		t.Errorf("re-expose = %+v, %v; want the stored token", again, err)
	}
	if err := sb.UnexposePort(ctx, 9999); !errdefs.IsCode(err, errdefs.CodePortNotExposed) {
		t.Errorf("UnexposePort(unexposed) = %v; want PORT_NOT_EXPOSED", err)
	}
	ports, err := sb.ExposedPorts(ctx)
	if err != nil || len(ports) != 1 || ports[0].Port != 8080 {
		t.Errorf("ExposedPorts = %+v, %v", ports, err)
	}
}

func status(t *testing.T, hc *http.Client, u string) int {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// stripTimestamp removes the envelope's timestamp so two refusals can be compared.
func stripTimestamp(b []byte) []byte {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	delete(m, "timestamp")
	out, _ := json.Marshal(m)
	return out
}

func previewPort() string {
	_, p, _ := net.SplitHostPort(previewAddr)
	return p
}
