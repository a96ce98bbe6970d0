package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/netns"
)

// goalPreviewAdded is the goal for the preview proxy: added latency at the median.
const goalPreviewAdded = time.Millisecond

// previewResults are the preview proxy measurements.
type previewResults struct {
	direct, proxied         series // GET /small, keep-alive
	directMiBs, proxiedMiBs []float64
	bigMiB                  int
}

// previewProxy starts previewtarget in a sandbox, exposes its port and alternates GETs through
// the preview URL with GETs over a direct connection: a socket opened inside the sandbox's
// network namespace to the same server (what the proxy itself dials), with keep-alive on both.
func (b *bench) previewProxy(ctx context.Context, targetBin string) error {
	p := &b.preview
	p.direct.name = "direct: GET /small in the sandbox's netns"
	p.proxied.name = "hutch: GET /small via preview URL"
	p.bigMiB = 256

	sb, err := b.c.Sandbox(ctx, fmt.Sprintf("bench-%s-preview", b.tag), b.opts)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = sb.Destroy(cctx)
	}()
	f, err := os.Open(targetBin)
	if err != nil {
		return err
	}
	_, err = sb.WriteFileFrom(ctx, "/usr/local/bin/previewtarget", f)
	f.Close()
	if err != nil {
		return err
	}
	if _, err := sb.Exec(ctx, "chmod 755 /usr/local/bin/previewtarget", nil); err != nil {
		return err
	}
	proc, err := sb.StartProcess(ctx, "previewtarget -listen 127.0.0.1:8080", client.ProcessOptions{ID: "target"})
	if err != nil {
		return err
	}
	if _, err := proc.WaitForPort(ctx, 8080, client.PortWaitOptions{Mode: "http", Path: "/small", Timeout: time.Minute}); err != nil {
		return err
	}
	ep, err := sb.ExposePort(ctx, 8080, client.ExposeOptions{})
	if err != nil {
		return err
	}
	nsPath := netns.RunDir + "/" + nsPrefix + sb.ID()
	direct := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return netns.Dial(ctx, nsPath, network, "127.0.0.1:8080")
		},
		DisableCompression: true,
	}}
	proxied := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, previewListen)
		},
		DisableCompression: true,
	}}
	directURL := "http://localhost:8080/"
	get := func(hc *http.Client, u string, want int64) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || n != want {
			return fmt.Errorf("GET %s: %d, %d bytes; want 200, %d bytes", u, resp.StatusCode, n, want)
		}
		return nil
	}
	const warmup = 20
	progress("preview: %d warm-ups + %d iterations of GET /small each", warmup, b.cfg.m)
	for i := 0; i < warmup+b.cfg.m; i++ {
		steps := []struct {
			s  *series
			hc *http.Client
			u  string
		}{{&p.direct, direct, directURL + "small"}, {&p.proxied, proxied, ep.URL + "small"}}
		if i%2 == 1 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, st := range steps {
			t0 := time.Now()
			if err := get(st.hc, st.u, 2); err != nil {
				return err
			}
			if i >= warmup {
				st.s.add(time.Since(t0))
			}
		}
	}
	progress("preview: 3 × GET of %d MiB each way", p.bigMiB)
	big := fmt.Sprintf("big?mib=%d", p.bigMiB)
	for range 3 {
		for _, st := range []struct {
			out *[]float64
			hc  *http.Client
			u   string
		}{{&p.directMiBs, direct, directURL + big}, {&p.proxiedMiBs, proxied, ep.URL + big}} {
			t0 := time.Now()
			if err := get(st.hc, st.u, int64(p.bigMiB)<<20); err != nil {
				return err
			}
			*st.out = append(*st.out, float64(p.bigMiB)/time.Since(t0).Seconds())
		}
	}
	return nil
}

// reportPreview prints the preview table, ratios and goal.
func (b *bench) reportPreview(out io.Writer) {
	p := &b.preview
	printTable(out, "Preview proxy: GET of 2 bytes, keep-alive (ms)", []*series{&p.direct, &p.proxied})
	d, h := p.direct.summarize(), p.proxied.summarize()
	fmt.Fprintf(out, "\nPreview proxy throughput, GET of %d MiB (MiB/s, best of %d)\n", p.bigMiB, len(p.directMiBs))
	bd, bp := maxOf(p.directMiBs), maxOf(p.proxiedMiBs)
	fmt.Fprintf(out, "  direct %8.0f   via preview URL %8.0f   ratio %.2f×\n", bd, bp, bp/bd)
	fmt.Fprintf(out, "\nPreview ratios (medians)\n")
	fmt.Fprintf(out, "  preview GET / direct GET                      %6.2f×  (added %s ms)\n", ratio(h.median, d.median), ms(h.median-d.median))
	added := h.median - d.median
	fmt.Fprintf(out, "  preview added latency at the median ≤ %s ms:  %s ms  %s\n", ms(goalPreviewAdded), ms(added),
		verdict(added <= goalPreviewAdded, fmt.Sprintf("missed by %s ms", ms(added-goalPreviewAdded))))
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
