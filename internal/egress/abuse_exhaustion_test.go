package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/mitm"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/proxy"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/store"
)

// Ceilings of abuse test #10: the test process is hutchd here (proxy, DNS, CA authority) plus
// the attacking clients, so they bound both together.
const (
	abuseRSSCeiling  = 384 << 20 // peak resident set size (measured: ~130 MiB)
	abuseHeapCeiling = 256 << 20 // peak heap, live and unswept objects (measured: ~100 MiB)
)

// memWatch samples the process's RSS and heap every 50 ms until stop and keeps the peaks.
type memWatch struct {
	peakRSS, peakHeap atomic.Uint64
	stop              chan struct{}
	done              chan struct{}
}

func watchMemory() *memWatch {
	w := &memWatch{stop: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss := residentBytes(); rss > w.peakRSS.Load() {
				w.peakRSS.Store(rss)
			}
			metrics.Read(sample)
			if h := sample[0].Value.Uint64(); h > w.peakHeap.Load() {
				w.peakHeap.Store(h)
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *memWatch) end() (rss, heap uint64) {
	close(w.stop)
	<-w.done
	return w.peakRSS.Load(), w.peakHeap.Load()
}

// residentBytes is VmRSS of this process (0 when unreadable).
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// newAbuseAuthority is hutchd's CA authority (real store, sealed keys, default leaf cache)
// with CAs for ids.
func newAbuseAuthority(t *testing.T, ids ...string) *mitm.Authority {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "keys", "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	a := mitm.NewAuthority(db, box, 0, nil)
	for _, id := range ids {
		if _, err := db.Insert(ctx, store.Sandbox{ID: id, Image: "img", ImageName: "default", InstanceType: "lite", Status: "running"}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Ensure(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// TestAbuseExhaustion is EGRESS.md §10 #10 (exhaustion and parser abuse) against an
// intercept-all policy: 5,000 connections sending 1 byte of ClientHello, 20 KiB garbage
// ClientHellos, 64 KiB+ request headers on an intercepted host and 10,000 distinct SNIs
// (leaf cache churn). The per-sandbox connection cap and the ClientHello deadline hold, memory
// stays under fixed ceilings, a second sandbox's egress works during the floods, nothing
// reaches the sink, and a legitimate post-quantum ClientHello split over two TCP segments
// still works afterwards.
func TestAbuseExhaustion(t *testing.T) {
	alog, err := audit.New(t.TempDir(), 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alog.Close() }) // after the harness's cleanup (LIFO)
	auth := newAbuseAuthority(t, "sbx", "sby")
	ih, sb := newInterceptHarnessWith(t, map[string]string{"API_TOKEN": apiToken}, policy.Spec{
		Inspect: policy.InspectAll,
		Rules: []policy.Rule{{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}}},
	}, nil, alog, func(c *Config) { c.Intercept.Leaf = auth.Leaf })
	other := ih.sandbox("sby", 4, true) // default policy: allow-all, tunnelled
	caPEM, err := auth.CertPEM(context.Background(), "sbx")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "sbx-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(caPEM)
	tlsAddr := egresstest.APIIP + ":443"

	// otherWorks is the second sandbox's egress test: a tunnelled HTTPS request.
	otherWorks := func(t *testing.T, when string) {
		t.Helper()
		body, status, err := curl(other, "--cacert", ih.net.CAFile, "https://other.example.test/headers")
		if err != nil || status != "200" || !strings.Contains(body, `"host":"other.example.test"`) {
			t.Errorf("second sandbox's request %s: %s %v %s", when, status, err, body)
		}
	}
	mem := watchMemory()
	// fromAbuser counts api requests not made by the second sandbox (other.example.test).
	fromAbuser := func() int {
		n := 0
		for _, r := range ih.net.APIRequests() {
			if r.Host != "other.example.test" {
				n++
			}
		}
		return n
	}
	abuserBefore := fromAbuser()

	t.Run("5000 connections of 1 byte: cap and ClientHello deadline hold", func(t *testing.T) {
		const flood = 5000
		conns := make([]net.Conn, 0, flood)
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		var dialErr error
		start := time.Now()
		inNS(t, sb, func() {
			for i := 0; i < flood; i++ {
				c, err := net.DialTimeout("tcp4", tlsAddr, 5*time.Second)
				if err != nil {
					dialErr = fmt.Errorf("dial %d: %w", i, err)
					return
				}
				c.Write([]byte{0x16}) // first byte of a TLS record, then nothing
				conns = append(conns, c)
			}
		})
		if dialErr != nil {
			t.Fatal(dialErr)
		}
		dialed := time.Since(start)
		otherWorks(t, "during the flood")

		// Connections over the cap are closed at accept; the others wait for their ClientHello.
		var closed, open atomic.Int64
		probe := func(deadline time.Duration) {
			var wg sync.WaitGroup
			for _, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.SetReadDeadline(time.Now().Add(deadline))
					_, err := c.Read(make([]byte, 1))
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						open.Add(1)
						return
					}
					closed.Add(1)
				}()
			}
			wg.Wait()
		}
		probe(2 * time.Second)
		t.Logf("%d connections dialled in %s: %d closed at once, %d held", flood, dialed.Round(time.Millisecond), closed.Load(), open.Load())
		if open.Load() > proxy.MaxConnsPerSandbox {
			t.Errorf("%d connections held open, cap %d", open.Load(), proxy.MaxConnsPerSandbox)
		}
		if closed.Load() < flood-proxy.MaxConnsPerSandbox {
			t.Errorf("only %d connections refused, want at least %d", closed.Load(), flood-proxy.MaxConnsPerSandbox)
		}
		if dialed < 5*time.Second && open.Load() < proxy.MaxConnsPerSandbox/2 {
			t.Errorf("only %d connections held: the cap, not the deadline, should close the rest", open.Load())
		}
		// The 10 s ClientHello deadline closes the held ones (generous bound: 10 s + 20 s).
		closed.Store(0)
		open.Store(0)
		probe(30 * time.Second)
		if open.Load() != 0 {
			t.Errorf("%d connections outlived the ClientHello deadline", open.Load())
		}
		alog.Flush()
		events, err := alog.Read("sbx", 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		var limited bool
		for _, e := range events {
			limited = limited || (e.Kind == audit.KindLimit && e.Limit == "connections")
		}
		if !limited {
			t.Error("no limit audit event for the connection cap")
		}
	})

	t.Run("20 KiB garbage ClientHellos are closed before the deadline", func(t *testing.T) {
		oversized := new(bytes.Buffer)
		// A ClientHello handshake message announcing 20 KiB, spread over records.
		body := make([]byte, 20<<10)
		rand.Read(body)
		msg := append([]byte{1, 0, byte(len(body) >> 8), byte(len(body))}, body...)
		for len(msg) > 0 {
			k := min(len(msg), 4096)
			oversized.Write([]byte{0x16, 3, 1, byte(k >> 8), byte(k)})
			oversized.Write(msg[:k])
			msg = msg[k:]
		}
		random := make([]byte, 20<<10)
		rand.Read(random)
		random[0] = 0x16
		for name, payload := range map[string][]byte{"oversized handshake": oversized.Bytes(), "random bytes": random} {
			c, err := dialFrom(t, sb, "tcp4", tlsAddr)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			c.Write(payload) // the proxy may reset before it all went out
			c.SetReadDeadline(time.Now().Add(8 * time.Second))
			n, err := c.Read(make([]byte, 1))
			var ne net.Error
			if n != 0 || (errors.As(err, &ne) && ne.Timeout()) {
				t.Errorf("%s: connection not closed by the proxy (read %d, %v)", name, n, err)
			}
			t.Logf("%s: closed after %s (%v)", name, time.Since(t0).Round(time.Millisecond), err)
			c.Close()
		}
	})

	t.Run("64 KiB+ request headers on an intercepted host are refused", func(t *testing.T) {
		hdr := filepath.Join(t.TempDir(), "headers")
		if err := os.WriteFile(hdr, []byte("X-Fill: "+strings.Repeat("a", 80<<10)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := fromAbuser()
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"https h1", []string{"--http1.1", "--cacert", caFile, "https://api.example.test/headers"}, "431"},
			{"https h2", []string{"--http2", "--cacert", caFile, "https://api.example.test/headers"}, ""},
			{"http", []string{"http://api.example.test/headers"}, "431"},
		} {
			_, status, _ := curl(sb, append([]string{"-H", "@" + hdr}, c.args...)...)
			if status == "200" || (c.want != "" && status != c.want) {
				t.Errorf("%s: status %q, want a refusal (%q)", c.name, status, c.want)
			}
		}
		if n := fromAbuser() - before; n != 0 {
			t.Errorf("upstream received %d oversized requests", n)
		}
		otherWorks(t, "after the header flood")
	})

	t.Run("10000 distinct SNIs: leaves minted and evicted, memory bounded", func(t *testing.T) {
		const names, workers = 10000, 8
		var next, failed atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				inNS(t, sb, func() { // the whole loop on the namespace's locked thread
					for {
						i := next.Add(1) - 1
						if i >= names {
							return
						}
						host := fmt.Sprintf("s%05d.churn.example.test", i)
						if err := handshake(tlsAddr, host); err != nil {
							failed.Add(1)
							firstErr.CompareAndSwap(nil, err)
						}
					}
				})
			}()
		}
		otherWorks(t, "during the SNI churn")
		wg.Wait()
		if n := failed.Load(); n != 0 {
			t.Errorf("%d of %d handshakes failed; first: %v", n, names, firstErr.Load())
		}
	})

	t.Run("a legitimate post-quantum ClientHello in two TCP segments still works", func(t *testing.T) {
		var resp *http.Response
		var body []byte
		var curve tls.CurveID
		err := errors.New("not run")
		inNS(t, sb, func() {
			var c net.Conn
			if c, err = net.DialTimeout("tcp4", tlsAddr, 5*time.Second); err != nil {
				return
			}
			defer c.Close()
			tc := tls.Client(&splitConn{Conn: c, pause: 300 * time.Millisecond}, &tls.Config{
				ServerName: "api.example.test", RootCAs: caPool, NextProtos: []string{"http/1.1"},
				CurvePreferences: []tls.CurveID{tls.X25519MLKEM768},
			})
			tc.SetDeadline(time.Now().Add(20 * time.Second))
			if err = tc.Handshake(); err != nil {
				return
			}
			curve = tc.ConnectionState().CurveID
			io.WriteString(tc, "GET /headers HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n")
			if resp, err = http.ReadResponse(bufio.NewReader(tc), nil); err != nil {
				return
			}
			body, err = io.ReadAll(resp.Body)
		})
		if err != nil {
			t.Fatalf("split ClientHello: %v", err)
		}
		if resp.StatusCode != 200 || curve != tls.X25519MLKEM768 || !strings.Contains(string(body), "[redacted:API_TOKEN]") {
			t.Fatalf("status %d curve %v body %s", resp.StatusCode, curve, body)
		}
		reqs := ih.net.APIRequests()
		if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer "+apiToken {
			t.Fatalf("upstream Authorization %q", got)
		}
	})

	rss, heap := mem.end()
	t.Logf("peak RSS %d MiB, peak heap %d MiB (ceilings %d, %d MiB)", rss>>20, heap>>20, abuseRSSCeiling>>20, abuseHeapCeiling>>20)
	if rss > abuseRSSCeiling || heap > abuseHeapCeiling {
		t.Errorf("memory over the ceiling: RSS %d MiB, heap %d MiB", rss>>20, heap>>20)
	}
	for _, h := range ih.net.SinkHits() {
		t.Errorf("sink was reached: %+v", h)
	}
	// Only the legitimate request of the last subtest reached api: the floods never did.
	if n := fromAbuser() - abuserBefore; n > 1 {
		t.Errorf("api received %d requests from the abuse (want only the legitimate one)", n)
	}
}

// handshake completes a TLS handshake with host as SNI on a new connection to addr (opened
// in the caller's namespace) and checks that the proxy presented a leaf for host.
func handshake(addr, host string) error {
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: host, InsecureSkipVerify: true})
	tc.SetDeadline(time.Now().Add(15 * time.Second))
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("%s: %w", host, err)
	}
	if leaf := tc.ConnectionState().PeerCertificates[0]; leaf.VerifyHostname(host) != nil {
		return fmt.Errorf("%s: leaf for %v", host, leaf.DNSNames)
	}
	return nil
}

// splitConn sends its first Write (the ClientHello) as two TCP segments, pause apart.
type splitConn struct {
	net.Conn
	pause time.Duration
	done  bool
}

func (s *splitConn) Write(b []byte) (int, error) {
	if s.done || len(b) < 2 {
		return s.Conn.Write(b)
	}
	s.done = true
	n, err := s.Conn.Write(b[:len(b)/2])
	if err != nil {
		return n, err
	}
	time.Sleep(s.pause)
	m, err := s.Conn.Write(b[len(b)/2:])
	return n + m, err
}
