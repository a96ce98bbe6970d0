package preview

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/testutil"
)

// localDialer stands in for the sandbox manager in the pure-logic proxy tests: it dials real
// listeners on the host, one per "<id>:<port>". An unknown sandbox is SANDBOX_NOT_FOUND; a
// known one whose port has no listener dials a closed port (ECONNREFUSED).
type localDialer struct {
	mu      sync.Mutex
	sandbox map[string]bool
	addrs   map[string]string // "<id>:<port>" → real address
	dials   atomic.Int64
	touches atomic.Int64
	held    atomic.Int64 // holds not released yet
}

func (d *localDialer) Touch(id sandboxid.ID) { d.touches.Add(1) }

func (d *localDialer) Hold(id sandboxid.ID) func() {
	d.held.Add(1)
	var once sync.Once
	return func() { once.Do(func() { d.held.Add(-1) }) }
}

// waitHeld waits (bounded) until the dialer's open holds are want.
func (d *localDialer) waitHeld(t *testing.T, want int64) {
	t.Helper()
	if !testutil.Poll(t, 5*time.Millisecond, 30*time.Second, func() bool { return d.held.Load() == want }) {
		t.Fatalf("open holds = %d; want %d", d.held.Load(), want)
	}
}

func (d *localDialer) DialPort(ctx context.Context, id sandboxid.ID, port int) (net.Conn, error) {
	d.dials.Add(1)
	d.mu.Lock()
	known, addr := d.sandbox[id.String()], d.addrs[id.String()+":"+strconv.Itoa(port)]
	d.mu.Unlock()
	if !known {
		return nil, errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id)
	}
	if addr == "" {
		addr = closedAddr
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr)
}

// closedAddr is a loopback address nothing listens on.
var closedAddr = func() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}()

// fixture is a preview listener (a real HTTP server running Proxy) over a real store, with
// sandboxes sb1 and sb2.
type fixture struct {
	svc    *Service
	dialer *localDialer
	proxy  *Proxy
	srv    *httptest.Server
	client *http.Client
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st := testStore(t, "sb1", "sb2")
	f := &fixture{
		svc:    NewService(Config{Domain: "localhost"}, st, nil),
		dialer: &localDialer{sandbox: map[string]bool{"sb1": true, "sb2": true}, addrs: map[string]string{}},
	}
	f.proxy = NewProxy("localhost", st, f.dialer, nil)
	t.Cleanup(f.proxy.Close)
	newPreviewServer(t, f)
	return f
}

// newPreviewServer serves f.proxy on a real listener and points f.client at it.
func newPreviewServer(t testing.TB, f *fixture) *httptest.Server {
	t.Helper()
	f.srv = httptest.NewServer(f.proxy)
	t.Cleanup(f.srv.Close)
	// Every host name reaches the preview listener, as wildcard DNS would.
	addr := f.srv.Listener.Addr().String()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 256,
	}
	t.Cleanup(tr.CloseIdleConnections)
	f.client = &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	return f.srv
}

// upstream starts a real HTTP server standing for the service on port of sandbox id and
// exposes that port; it returns the preview URL.
func (f *fixture) upstream(t testing.TB, id string, port int, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.dialer.mu.Lock()
	f.dialer.addrs[id+":"+strconv.Itoa(port)] = srv.Listener.Addr().String()
	f.dialer.mu.Unlock()
	return f.expose(t, id, port)
}

func (f *fixture) expose(t testing.TB, id string, port int) string {
	t.Helper()
	p, err := f.svc.Expose(context.Background(), id, ExposeRequest{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(p.URL, "/")
}

func (f *fixture) get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := f.client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", url, err)
	}
	return resp, body
}

// withPort puts the preview listener's port into a host-only URL, so the Host header carries
// a port as browsers send it.
func (f *fixture) withPort(url string) string {
	_, port, _ := net.SplitHostPort(f.srv.Listener.Addr().String())
	return url + ":" + port
}

// hello is an upstream that echoes what it received as JSON.
func hello() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", "yes")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "host": r.Host, "uri": r.RequestURI, "body": string(body),
			"xfh": r.Header.Get("X-Forwarded-Host"), "xfp": r.Header.Get("X-Forwarded-Proto"),
			"xff": r.Header.Get("X-Forwarded-For"), "xou": r.Header.Get("X-Original-URL"),
			"xsn": r.Header.Get("X-Sandbox-Name"), "custom": r.Header.Get("X-Custom"),
		})
	})
}

// stripTimestamp removes the envelope's timestamp, the one field that differs per request.
func stripTimestamp(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if _, ok := m["timestamp"]; !ok {
		t.Fatalf("envelope without timestamp: %s", body)
	}
	delete(m, "timestamp")
	return m
}

func TestProxyNotFoundIsUniform(t *testing.T) {
	f := newFixture(t)
	good := f.upstream(t, "sb1", 8080, hello())
	tok := good[strings.LastIndex(good, "-")+1 : strings.Index(good, ".localhost")]
	_ = f.upstream(t, "sb2", 8080, hello())
	f.dialer.mu.Lock()
	f.dialer.sandbox["ghost"] = true // a sandbox the dialer knows but the store does not
	f.dialer.mu.Unlock()

	bad := []struct{ name, url string }{
		{"unparsable host", "http://localhost"},
		{"other domain", "http://8080-sb1-" + tok + ".example.com"},
		{"bad port", "http://80-sb1-" + tok + ".localhost"},
		{"unknown sandbox", "http://8080-nope-" + tok + ".localhost"},
		{"sandbox only in dialer", "http://8080-ghost-" + tok + ".localhost"},
		{"unexposed port", "http://8081-sb1-" + tok + ".localhost"},
		{"wrong token", "http://8080-sb1-wrong.localhost"},
		{"token of another sandbox", "http://8080-sb1-" + strings.TrimPrefix(f.mustURL(t, "sb2", 8080), "http://8080-sb2-")},
		{"token prefix", "http://8080-sb1-" + tok[:8] + ".localhost"},
		{"reserved id", "http://8080-www-" + tok + ".localhost"},
	}
	var first map[string]any
	for _, tt := range bad {
		resp, body := f.get(t, f.withPort(tt.url)+"/some/path?x=1")
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Upstream") != "" {
			t.Errorf("%s: status %d upstream %q; want 404 from the proxy", tt.name, resp.StatusCode, resp.Header.Get("X-Upstream"))
			continue
		}
		m := stripTimestamp(t, body)
		if first == nil {
			first = m
			want := map[string]any{"code": "INVALID_TOKEN", "message": "preview URL not found", "httpStatus": float64(404)}
			if fmt.Sprint(m) != fmt.Sprint(want) {
				t.Fatalf("404 envelope = %v; want %v", m, want)
			}
			continue
		}
		if fmt.Sprint(m) != fmt.Sprint(first) {
			t.Errorf("%s: envelope %v differs from %v", tt.name, m, first)
		}
	}
	if n := f.dialer.dials.Load(); n != 0 {
		t.Errorf("%d dials for requests that do not route; want 0", n)
	}
	if n := f.dialer.touches.Load(); n != 0 {
		t.Errorf("%d refused requests counted as activity; want 0", n)
	}

	// A sandbox destroyed between the token check and the dial looks the same.
	sb2 := f.mustURL(t, "sb2", 8080)
	f.dialer.mu.Lock()
	f.dialer.sandbox["sb2"] = false
	f.dialer.mu.Unlock()
	if resp, body := f.get(t, sb2); resp.StatusCode != http.StatusNotFound || fmt.Sprint(stripTimestamp(t, body)) != fmt.Sprint(first) {
		t.Errorf("sandbox gone at dial: %d %s", resp.StatusCode, body)
	}

	// The good URL works, and stops working once unexposed.
	if resp, _ := f.get(t, good); resp.StatusCode != http.StatusOK {
		t.Fatalf("good URL status %d", resp.StatusCode)
	}
	if err := f.svc.Unexpose(context.Background(), "sb1", 8080); err != nil {
		t.Fatal(err)
	}
	resp, body := f.get(t, good)
	if resp.StatusCode != http.StatusNotFound || fmt.Sprint(stripTimestamp(t, body)) != fmt.Sprint(first) {
		t.Fatalf("after unexpose: %d %s", resp.StatusCode, body)
	}
}

func (f *fixture) mustURL(t *testing.T, id string, port int) string {
	t.Helper()
	list, err := f.svc.List(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		if p.Port == port {
			return strings.TrimSuffix(p.URL, "/")
		}
	}
	t.Fatalf("port %d of %s not exposed", port, id)
	return ""
}

func TestProxyForwardsRequest(t *testing.T) {
	f := newFixture(t)
	url := f.withPort(f.upstream(t, "sb1", 8080, hello()))
	host := strings.TrimPrefix(url, "http://")

	for _, u := range []string{url, "http://" + strings.ToUpper(host)} {
		req, _ := http.NewRequest(http.MethodPost, u+"/api/items?a=1&b=two", strings.NewReader("payload"))
		req.Header.Set("X-Custom", "kept")
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		req.Header.Set("X-Sandbox-Name", "spoofed")
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", u, resp.StatusCode, err)
		}
		want := map[string]string{
			"method": "POST", "host": "localhost:8080", "uri": "/api/items?a=1&b=two", "body": "payload",
			"xfh": strings.TrimPrefix(u, "http://"), "xfp": "http", "xff": "203.0.113.9, 127.0.0.1",
			"xou": u + "/api/items?a=1&b=two", "xsn": "sb1", "custom": "kept",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n got %v\nwant %v", u, got, want)
		}
	}
}

// TestProxyStreamsSSE: the first event reaches the client while the upstream handler is still
// running (it only ends after the client has read that event).
func TestProxyStreamsSSE(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	url := f.upstream(t, "sb1", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: second\n\n")
	}))
	resp, err := f.client.Get(url + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	done := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		done <- line
	}()
	select {
	case line := <-done:
		if line != "data: first\n" {
			t.Fatalf("first line = %q", line)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("first event not delivered while the upstream handler runs (buffered)")
	}
	// The open stream holds the sandbox awake until it ends.
	if n := f.dialer.held.Load(); n != 1 {
		t.Fatalf("open holds during the stream = %d; want 1", n)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: second\n\n" {
		t.Fatalf("rest = %q", rest)
	}
	f.dialer.waitHeld(t, 0)
}

func TestProxyWebSocket(t *testing.T) {
	f := newFixture(t)
	url := f.upstream(t, "sb1", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: []string{"*"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo: "), msg...)); err != nil {
				return
			}
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(url, "http") + "/ws"
	c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: f.client})
	if err != nil {
		t.Fatalf("dial %s: %v", wsURL, err)
	}
	defer c.CloseNow()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for i := range 5 {
		msg := fmt.Sprintf("message %d", i)
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != "echo: "+msg {
			t.Fatalf("read = %q, %v", got, err)
		}
	}
	// An open WebSocket holds the sandbox awake; closing it releases the hold.
	if n := f.dialer.held.Load(); n != 1 {
		t.Fatalf("open holds with the WebSocket open = %d; want 1", n)
	}
	c.Close(websocket.StatusNormalClosure, "")
	f.dialer.waitHeld(t, 0)

	// A wrong token: the upgrade is refused with the 404.
	badURL := wsURL[:strings.LastIndex(wsURL, "-")+1] + "wrong.localhost/ws"
	_, resp, err = websocket.Dial(ctx, badURL, &websocket.DialOptions{HTTPClient: f.client})
	if err == nil {
		t.Fatal("dial with a wrong token succeeded")
	}
	if resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("wrong token: resp %+v, err %v; want 404", resp, err)
	}
}

// TestProxyLargeBody: a 100 MiB response arrives complete and intact.
func TestProxyLargeBody(t *testing.T) {
	f := newFixture(t)
	const size = 100 << 20
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	wantSum := sha256.New()
	for range size / len(chunk) {
		wantSum.Write(chunk)
	}
	url := f.upstream(t, "sb1", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for range size / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	resp, err := f.client.Get(url + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := sha256.New()
	n, err := io.Copy(sum, resp.Body)
	if err != nil || n != size {
		t.Fatalf("read %d bytes, %v; want %d", n, err, size)
	}
	if !bytes.Equal(sum.Sum(nil), wantSum.Sum(nil)) {
		t.Fatal("body differs")
	}
}

// TestProxyConcurrent: 200 concurrent requests are all answered correctly, and connections
// to the upstream are pooled (far fewer dials than requests over several rounds).
func TestProxyConcurrent(t *testing.T) {
	f := newFixture(t)
	url := f.upstream(t, "sb1", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.URL.Query().Get("i"))
	}))
	const n = 200
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := f.client.Get(fmt.Sprintf("%s/?i=%d", url, i))
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != 200 || string(b) != strconv.Itoa(i) {
					errs <- fmt.Errorf("request %d: %d %q %v", i, resp.StatusCode, b, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
	}
	if d := f.dialer.dials.Load(); d > 2*n {
		t.Errorf("%d dials for %d requests; want pooled connections", d, 3*n)
	}
}

func TestProxyPoolsSequential(t *testing.T) {
	f := newFixture(t)
	url := f.upstream(t, "sb1", 8080, hello())
	for range 20 {
		if resp, _ := f.get(t, url); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if d := f.dialer.dials.Load(); d != 1 {
		t.Fatalf("%d dials for 20 sequential requests; want 1 (keep-alive)", d)
	}
	// Every request counts as activity, also those on a pooled connection.
	if n := f.dialer.touches.Load(); n != 20 {
		t.Fatalf("%d touches for 20 requests; want 20", n)
	}
}

func TestProxyServiceNotResponding(t *testing.T) {
	f := newFixture(t)
	url := f.expose(t, "sb1", 8080) // exposed, nothing listens
	resp, body := f.get(t, url+"/")
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var env errdefs.Envelope
	if err := json.Unmarshal(body, &env); err != nil || env.Code != errdefs.CodeServiceNotResponding || env.Context["port"] != float64(8080) {
		t.Fatalf("envelope %s, %v", body, err)
	}
	if !errors.Is(env.Err(), errdefs.ErrUnavailable) {
		t.Fatalf("class of %v", env.Err())
	}
}

// BenchmarkProxy measures one small GET through the preview proxy (keep-alive on both hops);
// compare with BenchmarkDirect for the latency the proxy adds.
func BenchmarkProxy(b *testing.B) {
	f := newFixture(b)
	url := f.upstream(b, "sb1", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	benchGet(b, f.client, url+"/")
}

// BenchmarkDirect is BenchmarkProxy's request sent straight to the upstream.
func BenchmarkDirect(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	benchGet(b, srv.Client(), srv.URL+"/")
}

func benchGet(b *testing.B, c *http.Client, url string) {
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// failingDialer fails every dial with a classified error carrying internal details.
type failingDialer struct{}

func (failingDialer) Touch(sandboxid.ID) {}

func (failingDialer) Hold(sandboxid.ID) func() { return func() {} }

func (failingDialer) DialPort(context.Context, sandboxid.ID, int) (net.Conn, error) {
	return nil, errdefs.New(errdefs.CodeSandboxStartFailed, "start failed: /var/lib/hutch/secret-path").With("agentLog", "private log")
}

// TestProxySandboxStartFailed: the code reaches the visitor, the details do not.
func TestProxySandboxStartFailed(t *testing.T) {
	st := testStore(t, "sb1")
	f := &fixture{svc: NewService(Config{Domain: "localhost"}, st, nil)}
	f.proxy = NewProxy("localhost", st, failingDialer{}, nil)
	t.Cleanup(f.proxy.Close)
	newPreviewServer(t, f)
	resp, body := f.get(t, f.expose(t, "sb1", 8080)+"/")
	var env errdefs.Envelope
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != http.StatusServiceUnavailable || env.Code != errdefs.CodeSandboxStartFailed {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if bytes.Contains(body, []byte("secret-path")) || bytes.Contains(body, []byte("private log")) {
		t.Fatalf("internal details in the preview reply: %s", body)
	}
}

// TestProxyRefusalDoesNotWaitForBody sends a refused request that announces a body and never
// sends it: the 404 comes at once and the connection is closed, so such requests cannot hold
// hutchd's connections (no token is needed to send them).
func TestProxyRefusalDoesNotWaitForBody(t *testing.T) {
	f := newFixture(t)
	c, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: 8080-sb1-nope.localhost\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no reply while the body is outstanding: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusNotFound || !resp.Close {
		t.Fatalf("reply %d, close %v; want 404 and the connection closed", resp.StatusCode, resp.Close)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("connection after the refusal: %v; want EOF (closed by the server)", err)
	}
}

// TestProxyRequestBodyLimit: a request body one byte over the bound is refused with 413
// REQUEST_TOO_LARGE, announced (before the sandbox is dialled) or chunked (cut while relayed);
// a body of exactly the bound reaches the upstream whole.
func TestProxyRequestBodyLimit(t *testing.T) {
	f := newFixture(t)
	const limit = 1 << 10
	f.proxy.SetMaxRequestBody(limit)
	var got atomic.Int64
	url := f.upstream(t, "sb1", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		got.Store(int64(len(b)))
		w.Write([]byte("ok"))
	}))
	post := func(n int, chunked bool) (int, string) {
		t.Helper()
		var body io.Reader = bytes.NewReader(bytes.Repeat([]byte("b"), n))
		if chunked {
			body = io.MultiReader(body)
		}
		resp, err := f.client.Post(url+"/upload", "application/octet-stream", body)
		if err != nil {
			t.Fatalf("POST %d bytes: %v", n, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var env struct{ Code string }
		json.Unmarshal(b, &env)
		return resp.StatusCode, env.Code
	}
	for _, chunked := range []bool{false, true} {
		got.Store(-1)
		if st, _ := post(limit, chunked); st != http.StatusOK || got.Load() != limit {
			t.Errorf("chunked=%v, %d bytes: %d, upstream got %d; want 200 and the whole body", chunked, limit, st, got.Load())
		}
		got.Store(-1)
		if st, code := post(limit+1, chunked); st != http.StatusRequestEntityTooLarge || code != "REQUEST_TOO_LARGE" {
			t.Errorf("chunked=%v, %d bytes: %d %s; want 413 REQUEST_TOO_LARGE", chunked, limit+1, st, code)
		}
		if got.Load() != -1 {
			t.Errorf("chunked=%v: the upstream handled a body over the bound (%d bytes)", chunked, got.Load())
		}
	}
}
