package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/mitm"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/proxy"
	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/store"
)

// The -egress mode (EGRESS.md §8.3): hutchd's egress path against a direct
// connection to the same server, in one run.
//
//	go run ./test/bench -egress [-m 200] [-egress-rounds 5] [-egress-size 1073741824]
//
// What runs: the fake internet of internal/egress/egresstest (netns hxnet, api server with
// /big), an egress.Service in this process configured as hutchd configures it (nftables
// table, DNS, HTTP and TLS listeners, the CA authority on a real store, a policy registry
// holding one sandbox policy with an inject rule for api.example.test), and a sandbox network
// namespace with its veth, made by internal/netns exactly as for a sandbox. Clients are curl
// processes: inside the sandbox namespace (through the nftables redirect and the proxy) or in
// the host namespace (direct, the baseline). No runc container is started: the packet path,
// the firewall and the proxy are the same, the container adds nothing on it.
//
// Measured, baseline and egress iterations alternating:
//   - throughput of GET /big (-egress-size bytes, HTTP/1.1): direct; tunnelled (TLS to
//     other.example.test, no rule: spliced); intercepted (api.example.test, inject rule:
//     terminated, header injected, response through the redactor, re-encrypted).
//   - new TLS connection latency (curl time to TLS established and total, GET /headers, one
//     connection each): direct, tunnel, intercept with the sandbox's leaf cached.
//   - leaf mint cost (mitm.CA.MintLeaf) and a cached Authority.Leaf.
//   - DNS queries per second of one sandbox (limiter raised; the default limit is 200/s,
//     burst 500) against the fake internet's authority queried directly.
var (
	egressFlag   = flag.Bool("egress", false, "measure the egress proxy against direct connections instead (throughput, TLS latency, leaf mint, DNS qps; see egress.go)")
	egressRounds = flag.Int("egress-rounds", 5, "with -egress: downloads of /big per path")
	egressSize   = flag.Int64("egress-size", egresstest.BigDefault, "with -egress: bytes per /big download")
)

// Goals of EGRESS.md §8.3.
const (
	goalTunnelRatio    = 0.9
	goalInterceptRatio = 0.5
)

// Names and ports of the benchmark's egress service, distinct from hutchd's, the tests' and
// the other benchmark modes'.
const (
	egressTable    = "hutchbenchx"
	egressIfPrefix = "hbx"
	egressNSPrefix = "hutchbx-"
	egressDNSPort  = 46053
	egressHTTPPort = 46001
	egressTLSPort  = 46002
	egressSandbox  = "benchegress"
	benchToken     = "bench-secret-token-0123456789"
)

var egressSubnet = netip.MustParsePrefix("10.93.0.0/16")

// egressEnv is what the -egress mode set up.
type egressEnv struct {
	inet   *egresstest.Internet
	svc    *egress.Service
	auth   *mitm.Authority
	sb     *netns.Net
	bundle string // PEM file: the fake internet's CA and the sandbox CA
}

func runEgress(ctx context.Context, cfg config, out io.Writer) (err error) {
	if *egressRounds < 1 || *egressSize < 1 {
		return errors.New("-egress-rounds and -egress-size must be at least 1")
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, nftables)")
	}
	for _, tool := range []string{"ip", "nft", "curl", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed: %w", tool, err)
		}
	}
	work, err := os.MkdirTemp("", "hutch-bench-egress-")
	if err != nil {
		return err
	}
	defer func() {
		if !cfg.keepWork {
			err = errors.Join(err, os.RemoveAll(work))
		}
	}()
	progress("starting the fake internet (waits for %s users to finish)", egresstest.InternetNS)
	env, stop, err := setupEgress(ctx, work)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()

	printEgressEnv(out, cfg)
	b := &egressBench{env: env, out: out}
	steps := []struct {
		name string
		fn   func(context.Context, config) error
	}{
		{"throughput", b.throughput},
		{"latency", b.latency},
		{"leaf mint", b.leafMint},
		{"dns", b.dnsQPS},
	}
	for _, s := range steps {
		if err := s.fn(ctx, cfg); err != nil {
			return interrupted(ctx, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	b.report()
	return nil
}

// setupEgress starts the fake internet, the egress service and one sandbox namespace; stop
// removes all of it.
func setupEgress(ctx context.Context, work string) (env *egressEnv, stop func() error, err error) {
	inet, stopNet, err := egresstest.OpenInternet(egresstest.InternetConfig{})
	if err != nil {
		return nil, nil, err
	}
	var undo []func() error
	stop = func() error {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		stopNet()
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, stop())
		}
	}()
	db, err := store.Open(ctx, filepath.Join(work, "hutch.db"))
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, db.Close)
	if _, err := db.Insert(ctx, store.Sandbox{ID: egressSandbox, Image: "bench", ImageName: "default", InstanceType: "standard-1", Status: "running"}); err != nil {
		return nil, nil, err
	}
	box, err := secret.LoadOrCreateKey(filepath.Join(work, "keys", "master.key"))
	if err != nil {
		return nil, nil, err
	}
	auth := mitm.NewAuthority(db, box, 0, nil)
	ca, err := auth.Ensure(ctx, egressSandbox, "")
	if err != nil {
		return nil, nil, err
	}
	bundle := filepath.Join(work, "bundle.pem")
	if err := os.WriteFile(bundle, append(append([]byte{}, inet.CAPEM...), ca.CertPEM...), 0o644); err != nil {
		return nil, nil, err
	}
	compiled, err := policy.Compile(policy.Spec{Rules: []policy.Rule{{ID: "bench", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
		Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.BENCH_TOKEN}"}}}}})
	if err != nil {
		return nil, nil, err
	}
	reg := policy.NewRegistry()
	reg.Set(egressSandbox, compiled)
	svc, err := egress.New(egress.Config{
		DNSPort: egressDNSPort, HTTPPort: egressHTTPPort, TLSPort: egressTLSPort,
		Table: egressTable, IfPrefix: egressIfPrefix,
		Resolver: inet.Resolver(),
		Policy:   reg,
		DNSRate:  1e6, DNSBurst: 1e6,
		Intercept: &proxy.InterceptConfig{
			Leaf: auth.Leaf,
			Secret: func(_ context.Context, name string) ([]byte, error) {
				if name != "BENCH_TOKEN" {
					return nil, errdefs.Newf(errdefs.CodeSecretNotFound, "no secret %s", name)
				}
				return []byte(benchToken), nil
			},
			RootCAs: inet.CAPool,
		},
	}, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := svc.Start(ctx); err != nil {
		return nil, nil, err
	}
	undo = append(undo, svc.Close)
	mgr, err := netns.New(netns.Config{IfPrefix: egressIfPrefix, NSPrefix: egressNSPrefix, Subnet: egressSubnet}, nil)
	if err != nil {
		return nil, nil, err
	}
	sb, err := mgr.Setup(ctx, egressSandbox, 1)
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, func() error { return mgr.Teardown(context.Background(), egressSandbox) })
	if err := svc.AddSandbox(ctx, egressSandbox, sb.HostIf, sb.Gateway, sb.Addr); err != nil {
		return nil, nil, err
	}
	return &egressEnv{inet: inet, svc: svc, auth: auth, sb: sb, bundle: bundle}, stop, nil
}

func printEgressEnv(out io.Writer, cfg config) {
	fmt.Fprintf(out, "Hutch egress benchmark, %s\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(out, "  cpu:        %d cores, %s\n", goruntime.NumCPU(), cpuModel())
	fmt.Fprintf(out, "  go:         %s\n", goruntime.Version())
	fmt.Fprintf(out, "  curl:       %s\n", curlVersion())
	fmt.Fprintf(out, "  path:       curl in a sandbox netns → veth → nftables redirect → egress proxy (this process) → %s\n", egresstest.InternetNS)
	fmt.Fprintf(out, "  baseline:   curl in the host netns → %s (same server, same certificate)\n", egresstest.InternetNS)
	fmt.Fprintf(out, "  iterations: -egress-rounds %d × %d MiB, -m %d (latency)\n", *egressRounds, *egressSize>>20, cfg.m)
}

func curlVersion() string {
	b, err := exec.Command("curl", "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)[0]
}

// curlTimes are curl's -w timings of one transfer.
type curlTimes struct {
	appconnect, total time.Duration
	size              int64
	code              string
}

// curlPath is one way of reaching the api server.
type curlPath struct {
	name string
	host string // TLS server name (other.example.test: no rule; api.example.test: inject rule)
	inNS bool   // run inside the sandbox namespace (through the proxy)
}

var (
	pathDirect    = curlPath{name: "direct", host: "other.example.test"}
	pathTunnel    = curlPath{name: "tunnel", host: "other.example.test", inNS: true}
	pathIntercept = curlPath{name: "intercept", host: "api.example.test", inNS: true}
)

// curl fetches https://<path.host><target> on a new connection (HTTP/1.1, the address
// pinned to api's so no DNS is involved; the proxy resolves the name itself) and returns
// curl's timings.
func (e *egressEnv) curl(ctx context.Context, p curlPath, target string) (curlTimes, error) {
	args := []string{"curl", "-sS", "--http1.1", "--max-time", "600", "--cacert", e.bundle,
		"--resolve", p.host + ":443:" + egresstest.APIIP, "-o", "/dev/null",
		"-w", "%{http_code} %{size_download} %{time_appconnect} %{time_total}",
		"https://" + p.host + target}
	if p.inNS {
		args = append([]string{"ip", "netns", "exec", filepath.Base(e.sb.NSPath)}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"}
	b, err := cmd.CombinedOutput()
	if err != nil {
		return curlTimes{}, fmt.Errorf("%s %s: %w: %s", p.name, target, err, b)
	}
	f := strings.Fields(string(b))
	if len(f) != 4 {
		return curlTimes{}, fmt.Errorf("%s %s: curl printed %q", p.name, target, b)
	}
	var t curlTimes
	t.code = f[0]
	t.size, _ = strconv.ParseInt(f[1], 10, 64)
	sec := func(s string) time.Duration {
		v, _ := strconv.ParseFloat(s, 64)
		return time.Duration(v * float64(time.Second))
	}
	t.appconnect, t.total = sec(f[2]), sec(f[3])
	if t.code != "200" {
		return t, fmt.Errorf("%s %s: HTTP %s", p.name, target, t.code)
	}
	return t, nil
}
