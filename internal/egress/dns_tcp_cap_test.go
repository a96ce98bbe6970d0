package egress

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/hutchdev/hutch/internal/egress/dns"
	"github.com/hutchdev/hutch/internal/netns"
)

// TestDNSTCPConnCap floods the DNS server with idle TCP connections from one sandbox: hutchd
// keeps at most dns.MaxTCPConnsPerSandbox of them (closing the oldest), and TCP queries from
// the flooding sandbox and from another one are still answered during the flood.
func TestDNSTCPConnCap(t *testing.T) {
	requirePrivileges(t)
	h := newHarness(t, Config{Upstreams: map[string]string{"web.test": "127.0.0.1:9"}})
	sb1 := h.sandbox("sb1", 1, true)
	sb2 := h.sandbox("sb2", 2, true)

	const flood = 1000
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var dialErr error
	inNS(t, sb1, func() {
		for range flood {
			c, err := net.DialTimeout("tcp4", sb1.Gateway.String()+":53", 3*time.Second)
			if err != nil {
				dialErr = err
				return
			}
			conns = append(conns, c) // nothing sent: the server waits for its read timeout
		}
	})
	if dialErr != nil {
		t.Fatalf("dial %d: %v", len(conns), dialErr)
	}
	var held, closed atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(time.Second))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				held.Add(1)
				return
			}
			closed.Add(1)
		}()
	}
	wg.Wait()
	t.Logf("%d idle TCP connections to the DNS server: %d held, %d closed", flood, held.Load(), closed.Load())
	if held.Load() > dns.MaxTCPConnsPerSandbox {
		t.Errorf("%d idle TCP connections of one sandbox held, want at most %d", held.Load(), dns.MaxTCPConnsPerSandbox)
	}
	for _, sb := range []*netns.Net{sb1, sb2} {
		r, err := tcpQuery(t, sb, sb.Gateway.String()+":53", "web.test")
		if err != nil || len(aAnswers(r)) != 1 || aAnswers(r)[0] != sb.Gateway.String() {
			t.Errorf("TCP query from %s during the flood: %v %v; want the gateway %s", sb.Addr, r, err, sb.Gateway)
		}
	}
}

// tcpQuery asks server for name's A records over TCP from inside n.
func tcpQuery(t *testing.T, n *netns.Net, server, name string) (*mdns.Msg, error) {
	t.Helper()
	var r *mdns.Msg
	err := errors.New("namespace not entered")
	inNS(t, n, func() {
		m := new(mdns.Msg)
		m.SetQuestion(mdns.Fqdn(name), mdns.TypeA)
		cl := &mdns.Client{Net: "tcp", Timeout: 3 * time.Second}
		r, _, err = cl.Exchange(m, server)
	})
	return r, err
}
