package preview

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	vnetns "github.com/vishvananda/netns"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/testutil"
)

// nsDialer dials 127.0.0.1:<port> inside one real network namespace, as the sandbox manager
// does for sandbox sb1.
type nsDialer struct{ path string }

func (d nsDialer) DialPort(ctx context.Context, id sandboxid.ID, port int) (net.Conn, error) {
	if id != "sb1" {
		return nil, errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id)
	}
	return netns.Dial(ctx, d.path, "tcp4", "127.0.0.1:"+strconv.Itoa(port))
}

func (nsDialer) Touch(sandboxid.ID) {}

func (nsDialer) Hold(sandboxid.ID) func() { return func() {} }

// listenIn opens a TCP listener on addr inside the namespace at path.
func listenIn(t *testing.T, path, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked if restoring fails: the thread then dies
		orig, err := vnetns.Get()
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer orig.Close()
		ns, err := vnetns.GetFromPath(path)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer ns.Close()
		if err := vnetns.Set(ns); err != nil {
			ch <- result{nil, err}
			return
		}
		ln, lerr := net.Listen("tcp4", addr)
		if err := vnetns.Set(orig); err != nil {
			ch <- result{nil, err}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{ln, lerr}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen in %s: %v", path, r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	return r.ln
}

// TestProxyThroughNetns runs the proxy against an upstream listening on 127.0.0.1 inside a
// real network namespace: plain HTTP and a WebSocket.
func TestProxyThroughNetns(t *testing.T) {
	testutil.RequiresRoot(t, "network namespaces")
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	const name = "hutchpv-proxy-test"
	_ = exec.Command("ip", "netns", "del", name).Run() // a leftover of a killed run
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del: %v %s", err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v %s", err, out)
	}
	path := netns.RunDir + "/" + name

	ln := listenIn(t, path, "127.0.0.1:0")
	_, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	if port < MinPort {
		t.Skipf("kernel gave port %d below %d", port, MinPort)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			typ, msg, err := c.Read(r.Context())
			if err == nil {
				_ = c.Write(r.Context(), typ, msg)
			}
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"host": r.Host, "sandbox": r.Header.Get("X-Sandbox-Name")})
	})}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { up.Close() })

	st := testStore(t, "sb1")
	f := &fixture{svc: NewService(Config{Domain: "localhost"}, st, nil)}
	f.proxy = NewProxy("localhost", st, nsDialer{path}, nil)
	t.Cleanup(f.proxy.Close)
	newPreviewServer(t, f)
	url := f.expose(t, "sb1", port)

	resp, body := f.get(t, url+"/")
	var got map[string]string
	if resp.StatusCode != 200 || json.Unmarshal(body, &got) != nil || got["host"] != "localhost:"+portStr || got["sandbox"] != "sb1" {
		t.Fatalf("through netns: %d %s", resp.StatusCode, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/ws", &websocket.DialOptions{HTTPClient: f.client})
	if err != nil {
		t.Fatalf("websocket through netns: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "ping" {
		t.Fatalf("echo = %q, %v", msg, err)
	}
	c.Close(websocket.StatusNormalClosure, "")

	// Another port in the namespace has no listener: 502.
	other := port + 1
	if other > MaxPort {
		other = port - 1
	}
	resp, body = f.get(t, f.expose(t, "sb1", other)+"/")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "SERVICE_NOT_RESPONDING") {
		t.Fatalf("closed port in netns: %d %s", resp.StatusCode, body)
	}
}
