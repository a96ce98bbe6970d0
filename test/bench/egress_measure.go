package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/netns"
)

// egressBench holds the -egress mode's samples.
type egressBench struct {
	env *egressEnv
	out io.Writer

	download   map[string]*series // /big download time per path
	appconnect map[string]*series // new connection → TLS established
	request    map[string]*series // new connection → GET /headers done
	mint       *series            // MintLeaf
	cachedLeaf time.Duration      // Authority.Leaf of a cached host, mean
	dnsDirect  float64            // queries/s to the authority from the host
	dnsSandbox float64            // queries/s through the sandbox's egress DNS
}

var egressPaths = []curlPath{pathDirect, pathTunnel, pathIntercept}

// throughput downloads /big -egress-rounds times per path, the order rotating each round.
func (b *egressBench) throughput(ctx context.Context, cfg config) error {
	b.download = map[string]*series{}
	for _, p := range egressPaths {
		b.download[p.name] = &series{name: p.name + ": GET /big"}
		if _, err := b.env.curl(ctx, p, "/big?size=1048576"); err != nil { // warm-up
			return err
		}
	}
	target := fmt.Sprintf("/big?size=%d", *egressSize)
	progress("throughput: %d rounds of %d MiB per path", *egressRounds, *egressSize>>20)
	for i := 0; i < *egressRounds; i++ {
		for k := range egressPaths {
			p := egressPaths[(i+k)%len(egressPaths)]
			if err := ctx.Err(); err != nil {
				return err
			}
			t, err := b.env.curl(ctx, p, target)
			if err != nil {
				return err
			}
			if t.size != *egressSize {
				return fmt.Errorf("%s: got %d bytes, want %d", p.name, t.size, *egressSize)
			}
			b.download[p.name].add(t.total)
		}
	}
	return nil
}

// latency opens -m new connections per path (GET /headers), alternating, after checking
// that the intercepted path injected the header (so it measures interception, not a tunnel).
func (b *egressBench) latency(ctx context.Context, cfg config) error {
	b.appconnect, b.request = map[string]*series{}, map[string]*series{}
	for _, p := range egressPaths {
		b.appconnect[p.name] = &series{name: p.name + ": TLS established"}
		b.request[p.name] = &series{name: p.name + ": GET /headers done"}
		for i := 0; i < 3; i++ { // warm-up: leaf cached, pools and caches warm
			if _, err := b.env.curl(ctx, p, "/headers"); err != nil {
				return err
			}
		}
	}
	reqs := b.env.inet.APIRequests()
	if len(reqs) == 0 || reqs[len(reqs)-1].Header.Get("Authorization") != "Bearer "+benchToken {
		return errors.New("the intercepted request reached api without the injected header")
	}
	progress("latency: %d new connections per path", cfg.m)
	for i := 0; i < cfg.m; i++ {
		for k := range egressPaths {
			p := egressPaths[(i+k)%len(egressPaths)]
			if err := ctx.Err(); err != nil {
				return err
			}
			t, err := b.env.curl(ctx, p, "/headers")
			if err != nil {
				return err
			}
			b.appconnect[p.name].add(t.appconnect)
			b.request[p.name].add(t.total)
		}
	}
	return nil
}

// leafMint times MintLeaf (a fresh key pair and signature per host) and a cached Leaf.
func (b *egressBench) leafMint(ctx context.Context, cfg config) error {
	ca, err := b.env.auth.Get(ctx, egressSandbox)
	if err != nil {
		return err
	}
	b.mint = &series{name: "mitm.CA.MintLeaf (new host)"}
	progress("leaf mint: %d leaves", cfg.m)
	for i := 0; i < cfg.m; i++ {
		host := fmt.Sprintf("h%d.mint.example.test", i)
		t0 := time.Now()
		if _, err := ca.MintLeaf(host, time.Now()); err != nil {
			return err
		}
		b.mint.add(time.Since(t0))
	}
	const cached = 100000
	t0 := time.Now()
	for i := 0; i < cached; i++ {
		if _, err := b.env.auth.Leaf(ctx, egressSandbox, "api.example.test"); err != nil {
			return err
		}
	}
	b.cachedLeaf = time.Since(t0) / cached
	return nil
}

// dnsQPS sends A queries for api.example.test for a few seconds from 8 concurrent clients:
// straight to the authority from the host, then from the sandbox to its gateway (redirected to
// the egress DNS server, which decides, resolves upstream and answers).
func (b *egressBench) dnsQPS(ctx context.Context, cfg config) error {
	const window = 3 * time.Second
	progress("dns: %s per target", window)
	var err error
	if b.dnsDirect, err = dnsLoad(ctx, "", egresstest.DNSIP+":53", window); err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	if b.dnsSandbox, err = dnsLoad(ctx, b.env.sb.NSPath, b.env.sb.Gateway.String()+":53", window); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

// dnsLoad runs 8 clients, each one UDP socket (opened in the namespace at nsPath, or the
// host's when empty) sending a query and waiting for its answer, for window; it returns
// successful answers per second. Any error answer or timeout fails the load.
func dnsLoad(ctx context.Context, nsPath, server string, window time.Duration) (float64, error) {
	const clients = 8
	conns := make([]net.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	err := inNetns(nsPath, func() error {
		for i := 0; i < clients; i++ {
			c, err := net.Dial("udp4", server)
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var ok atomic.Int64
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(window)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dc := &mdns.Conn{Conn: c}
			for time.Now().Before(deadline) && ctx.Err() == nil {
				m := new(mdns.Msg)
				m.SetQuestion("api.example.test.", mdns.TypeA)
				c.SetDeadline(time.Now().Add(5 * time.Second))
				err := dc.WriteMsg(m)
				var r *mdns.Msg
				if err == nil {
					r, err = dc.ReadMsg()
				}
				if err == nil && (r.Rcode != mdns.RcodeSuccess || len(r.Answer) == 0 || !strings.Contains(r.Answer[0].String(), egresstest.APIIP)) {
					err = fmt.Errorf("answer %s", r)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				ok.Add(1)
			}
		}()
	}
	start := time.Now()
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(ok.Load()) / time.Since(start).Seconds(), nil
}

// inNetns runs fn on a locked OS thread inside the namespace at path (the current one when
// path is empty); sockets fn opens stay in that namespace.
func inNetns(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	return netns.Do(path, fn)
}

// mibps is size bytes over d in MiB/s.
func mibps(size int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(size) / float64(1<<20) / d.Seconds()
}

func (b *egressBench) report() {
	out := b.out
	fmt.Fprintf(out, "\nThroughput, GET /big of %d MiB over HTTPS (HTTP/1.1), one new connection each\n", *egressSize>>20)
	fmt.Fprintf(out, "  %-10s %5s %12s %12s %12s %10s\n", "path", "n", "median MiB/s", "min MiB/s", "max MiB/s", "vs direct")
	fmt.Fprintf(out, "  %s\n", strings.Repeat("-", 66))
	direct := b.download[pathDirect.name].summarize().median
	for _, p := range egressPaths {
		s := b.download[p.name].summarize()
		fmt.Fprintf(out, "  %-10s %5d %12.0f %12.0f %12.0f %9.2f×\n", p.name, s.n, mibps(*egressSize, s.median),
			mibps(*egressSize, s.max), mibps(*egressSize, s.min), ratio(direct, s.median))
	}
	var rows []*series
	for _, p := range egressPaths {
		rows = append(rows, b.appconnect[p.name])
	}
	for _, p := range egressPaths {
		rows = append(rows, b.request[p.name])
	}
	rows = append(rows, b.mint)
	printTable(out, "New TLS connection latency (curl timings from its start), and leaf mint", rows)
	fmt.Fprintf(out, "  cached leaf (mitm.Authority.Leaf, hit): %.2f µs mean\n", float64(b.cachedLeaf)/float64(time.Microsecond))

	fmt.Fprintf(out, "\nDNS, A api.example.test, 8 concurrent clients, UDP\n")
	fmt.Fprintf(out, "  direct to the authority:              %8.0f queries/s\n", b.dnsDirect)
	fmt.Fprintf(out, "  one sandbox through egress DNS:       %8.0f queries/s (limiter raised; default limit 200/s, burst 500)\n", b.dnsSandbox)

	tunnel := ratio(direct, b.download[pathTunnel.name].summarize().median)
	icpt := ratio(direct, b.download[pathIntercept.name].summarize().median)
	fmt.Fprintf(out, "\nGoals (EGRESS.md §8.3)\n")
	fmt.Fprintf(out, "  tunnel throughput    %.2f× direct (goal ≥ %.1f×): %s\n", tunnel, goalTunnelRatio, met(tunnel >= goalTunnelRatio))
	fmt.Fprintf(out, "  intercept throughput %.2f× direct (goal ≥ %.1f×): %s\n", icpt, goalInterceptRatio, met(icpt >= goalInterceptRatio))
	dReq := b.request[pathDirect.name].summarize().median
	fmt.Fprintf(out, "  new connection + GET, added at the median: tunnel +%s ms, intercept +%s ms\n",
		ms(b.request[pathTunnel.name].summarize().median-dReq), ms(b.request[pathIntercept.name].summarize().median-dReq))
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
