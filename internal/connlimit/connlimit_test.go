package connlimit

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"
)

// rig is a loopback listener wrapped by a Limiter, its accepted connections in order.
type rig struct {
	l        *Limiter
	addr     string
	accepted chan net.Conn
}

func newRig(t *testing.T, lim Limits, log *slog.Logger) *rig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{l: New("test", lim, log), addr: ln.Addr().String(), accepted: make(chan net.Conn, 100)}
	wl := r.l.Wrap(ln)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := wl.Accept()
			if err != nil {
				return
			}
			r.accepted <- c
		}
	}()
	t.Cleanup(func() { wl.Close(); <-done })
	return r
}

// dial connects from the loopback address from; admitted says whether the rig's Accept must
// return the connection (else the Limiter must close it at once). It returns the client end
// and, when admitted, the server end.
func (r *rig) dial(t *testing.T, from string, admitted bool) (client, server net.Conn) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !admitted {
		if !closedByServer(c) {
			t.Fatalf("connection from %s over the cap was not closed", from)
		}
		return c, nil
	}
	select {
	case s := <-r.accepted:
		t.Cleanup(func() { s.Close() })
		return c, s
	case <-time.After(10 * time.Second):
		t.Fatalf("connection from %s was not accepted", from)
	}
	return nil, nil
}

// closedByServer reports whether the server closed c (EOF or reset) rather than keeping it
// open (the read times out). The Limiter closes a connection before Accept returns the one
// that displaced it, so the close is already on its way when this is called.
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func TestCaps(t *testing.T) {
	type step struct {
		from  string // local address to dial from
		trust bool   // trust the connection once accepted
		// admitted: Accept returns the connection; else it is closed at once.
		admitted bool
	}
	tests := []struct {
		name  string
		lim   Limits
		steps []step
		// open are the indexes of the steps whose connections must still be open at the end.
		open []int
		// total is Limiter.Open at the end.
		total int
	}{
		{
			name:  "per address: the oldest untrusted connection of the address is closed",
			lim:   Limits{PerAddr: 3},
			steps: []step{{"127.0.0.1", false, true}, {"127.0.0.1", false, true}, {"127.0.0.1", false, true}, {"127.0.0.1", false, true}, {"127.0.0.1", false, true}},
			open:  []int{2, 3, 4}, total: 3,
		},
		{
			name: "per address: other addresses are not affected",
			lim:  Limits{PerAddr: 2},
			steps: []step{{"127.0.0.2", false, true}, {"127.0.0.1", false, true}, {"127.0.0.1", false, true}, {"127.0.0.1", false, true},
				{"127.0.0.2", false, true}},
			open: []int{0, 2, 3, 4}, total: 4,
		},
		{
			name:  "per address: trusted connections do not count and are never closed",
			lim:   Limits{PerAddr: 2},
			steps: []step{{"127.0.0.1", true, true}, {"127.0.0.1", false, true}, {"127.0.0.1", false, true}, {"127.0.0.1", true, true}, {"127.0.0.1", false, true}},
			open:  []int{0, 2, 3, 4}, total: 4,
		},
		{
			name:  "total: the oldest untrusted connection of any address is closed",
			lim:   Limits{Total: 3},
			steps: []step{{"127.0.0.1", true, true}, {"127.0.0.2", false, true}, {"127.0.0.3", false, true}, {"127.0.0.4", false, true}},
			open:  []int{0, 2, 3}, total: 3,
		},
		{
			name:  "total: when every connection is trusted, the new one is closed at once",
			lim:   Limits{Total: 2},
			steps: []step{{"127.0.0.1", true, true}, {"127.0.0.2", true, true}, {"127.0.0.3", false, false}, {"127.0.0.1", false, false}},
			open:  []int{0, 1}, total: 2,
		},
		{
			name:  "both caps",
			lim:   Limits{PerAddr: 1, Total: 3},
			steps: []step{{"127.0.0.1", false, true}, {"127.0.0.1", false, true}, {"127.0.0.2", false, true}, {"127.0.0.3", false, true}, {"127.0.0.4", false, true}},
			open:  []int{2, 3, 4}, total: 3,
		},
		{
			name:  "no caps",
			lim:   Limits{},
			steps: []step{{"127.0.0.1", false, true}, {"127.0.0.1", false, true}, {"127.0.0.1", false, true}},
			open:  []int{0, 1, 2}, total: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.lim, nil)
			clients := make([]net.Conn, len(tt.steps))
			for i, s := range tt.steps {
				c, srv := r.dial(t, s.from, s.admitted)
				clients[i] = c
				if s.trust && srv != nil {
					srv.(*Conn).Trust()
				}
			}
			wantOpen := map[int]bool{}
			for _, i := range tt.open {
				wantOpen[i] = true
			}
			for i, c := range clients {
				if closed := closedByServer(c); closed == wantOpen[i] {
					t.Errorf("connection %d (from %s): closed = %v, want %v", i, tt.steps[i].from, closed, !wantOpen[i])
				}
			}
			if got := r.l.Open(); got != tt.total {
				t.Errorf("Open() = %d, want %d", got, tt.total)
			}
		})
	}
}

// TestCloseReleases checks that a closed connection, closed twice or after an eviction, frees
// its place once.
func TestCloseReleases(t *testing.T) {
	r := newRig(t, Limits{PerAddr: 2, Total: 2}, nil)
	_, s1 := r.dial(t, "127.0.0.1", true)
	_, s2 := r.dial(t, "127.0.0.1", true)
	s2.Close()
	s2.Close()
	if got := r.l.Open(); got != 1 {
		t.Fatalf("Open() after closing one of two = %d, want 1", got)
	}
	c3, _ := r.dial(t, "127.0.0.1", true)
	r.dial(t, "127.0.0.1", true) // evicts s1
	s1.Close()                   // after its eviction: must not free a second place
	if got := r.l.Open(); got != 2 {
		t.Fatalf("Open() = %d, want 2", got)
	}
	if closedByServer(c3) {
		t.Fatal("the connection after the evicted one was closed too")
	}
}

// TestLogRateLimited checks that a flood writes one log line per LogInterval, with the counts
// of what was closed in between.
func TestLogRateLimited(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, string(p))
		return len(p), nil
	}), nil))
	r := newRig(t, Limits{PerAddr: 1}, log)
	now := time.Unix(1e9, 0)
	r.l.mu.Lock()
	r.l.now = func() time.Time { return now }
	r.l.mu.Unlock()
	for range 5 {
		r.dial(t, "127.0.0.1", true) // each evicts the one before (the first evicts nothing)
	}
	r.l.mu.Lock()
	now = now.Add(LogInterval)
	r.l.mu.Unlock()
	r.dial(t, "127.0.0.1", true)
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2 (the first eviction, then one after LogInterval):\n%s", len(lines), strings.Join(lines, ""))
	}
	for i, want := range []string{"evicted=1", "evicted=4"} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "listener=test") {
			t.Errorf("log line %d = %q, want %s and listener=test", i, lines[i], want)
		}
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestHTTPTrust checks the http.Server wiring: a handler that calls Trust keeps its keep-alive
// connection through a flood of half-sent requests from the same address.
func TestHTTPTrust(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New("http", Limits{PerAddr: 4}, nil)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "ok" {
				Trust(r.Context())
			}
			io.WriteString(w, "hello")
		}),
		ConnContext:       ConnContext,
		ReadHeaderTimeout: time.Minute,
	}
	go srv.Serve(l.Wrap(ln))
	t.Cleanup(func() { srv.Close() })
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	t.Cleanup(hc.CloseIdleConnections)
	// get sends an authorised request and reports whether it went over a reused connection.
	get := func() (reused bool, err error) {
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		})
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String()+"/", nil)
		req.Header.Set("Authorization", "ok")
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return reused, err
	}
	if _, err := get(); err != nil {
		t.Fatal(err)
	}
	var flood []net.Conn
	for range 50 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	}
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	var held int
	for _, c := range flood {
		if !closedByServer(c) {
			held++
		}
	}
	if held > 4 {
		t.Errorf("%d half-sent connections held, want at most 4", held)
	}
	// The trusted connection survived: the next request reuses it, and a new client's
	// connection gets in as well.
	if reused, err := get(); err != nil || !reused {
		t.Errorf("request after the flood: reused the trusted connection = %v, err %v", reused, err)
	}
	if resp, err := http.Get("http://" + ln.Addr().String() + "/"); err != nil {
		t.Errorf("new connection after the flood: %v", err)
	} else {
		resp.Body.Close()
	}
}
