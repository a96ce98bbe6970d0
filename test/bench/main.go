// Command bench measures Hutch's two latency goals against raw runc on this host, in one run:
//
//  1. Cold create → first exec: client.Sandbox (a new ID) followed by Exec("true") through the
//     API, against a foreground `runc run /bin/true` of the same image (overlay-mounted with
//     fresh upper/work directories, the same runc spec generation and the same cgroup limits).
//     Goal: median ≤ 2× raw runc.
//  2. Exec round trip: Exec("true") through the API in a running sandbox, against
//     `runc exec <id> true` in a running container of the same image. Goal: median ≤ 3 ms.
//  3. Preview proxy: GET of a 2-byte response and of 256 MiB from a server in a sandbox,
//     through its preview URL, against a direct connection to the same server (a socket
//     opened in the sandbox's network namespace, no proxy). Goal: ≤ 1 ms added at the median.
//
// Baseline and hutch iterations alternate so machine noise hits both alike. It prints the
// environment, a table of median / p90 / min / max per measurement, the ratios and whether each
// goal is met, and a breakdown of hutchd's create path taken from its debug log.
//
// It builds hutchd and hutch-init, starts its own hutchd (private state dir, its own interface,
// netns and nftables names, subnet and ports) on the shared image directory ($HUTCH_IMAGES_DIR
// or /var/lib/hutch/images; the default image is built there if missing, which takes minutes),
// and removes everything it created when it ends, also on error or Ctrl-C.
//
// With -headline it measures the sandbox lifecycle on real input instead: npm ci of
// a large dependency tree, backup, restore, snapshot and fork of 4; see headline.go.
//
// Usage, as root, from the repository root:
//
//	go run ./test/bench [-n 20] [-m 200] [-type standard-1] [-disk-quota on|off]
//	go run ./test/bench -headline [-hn 3] [-type standard-1]
//	go run ./test/bench -gvisor [-n 20] [-m 200] [-type standard-1]
//	go run ./test/bench -fairness [-m 200] [-type standard-1]
//	go run ./test/bench -egress [-m 200]   (egress proxy vs direct; see egress.go)
//
// With -gvisor it compares sandboxes of the gvisor runtime with runc ones of the same hutchd
// (create → first exec, exec round trip); see gvisor.go.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/daemontest"
	"github.com/hutchdev/hutch/internal/image"
	"github.com/hutchdev/hutch/internal/sandbox"
)

// Goals from the issue.
const (
	goalCreateRatio = 2.0
	goalExecMedian  = 3 * time.Millisecond
)

type config struct {
	n            int    // cold create iterations
	m            int    // exec iterations
	instanceType string // sandbox size, also the baselines' cgroup limits
	imagesDir    string
	keepWork     bool
	headline     bool          // run the lifecycle headline instead
	code         bool          // run the code interpreter benchmark instead
	codeRefill   time.Duration // with -code: pause between create cycles (the pool refills)
	hn           int           // iterations of the headline's cheap steps
	gvisor       bool          // compare the gvisor runtime with runc instead
	fairness     bool          // run the CPU fairness benchmark instead
	memory       bool          // run the memory sleep benchmark instead
	diskQuota    string        // hutchd's --disk-quota: on or off
	userNS       string        // hutchd's --userns: on or off
}

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 20, "iterations of cold create → first exec (and of raw runc run)")
	flag.IntVar(&cfg.m, "m", 200, "iterations of exec of `true` (API and runc exec) and of preview GETs")
	flag.StringVar(&cfg.instanceType, "type", sandbox.DefaultInstanceType, "instance type of the sandboxes; the baselines get the same cgroup limits")
	flag.StringVar(&cfg.imagesDir, "images-dir", imagesDirDefault(), "image directory shared with hutchd (env HUTCH_IMAGES_DIR)")
	flag.BoolVar(&cfg.keepWork, "keep", false, "keep the work directory (hutchd log) after the run")
	flag.BoolVar(&cfg.headline, "headline", false, "run the lifecycle headline instead (npm ci, backup, restore, snapshot, fork 4; see headline.go)")
	flag.BoolVar(&cfg.code, "code", false, "run the code interpreter benchmark instead (contexts: create + first run, runs; see code.go)")
	flag.DurationVar(&cfg.codeRefill, "code-refill", 2*time.Second, "with -code: pause between create cycles, for the interpreter pool to refill (0: back to back)")
	flag.BoolVar(&cfg.gvisor, "gvisor", false, "compare gVisor sandboxes with runc ones instead: create → first exec, exec round trip (see gvisor.go)")
	flag.IntVar(&cfg.hn, "hn", 3, "with -headline: iterations of the cheap steps (backup, tar baselines, sandbox from snapshot, fork of 4)")
	flag.StringVar(&cfg.diskQuota, "disk-quota", "on", "hutchd's --disk-quota (on: each sandbox's disk is an image of its own; off: a directory)")
	flag.BoolVar(&cfg.memory, "memory", false, "compare memory sleeps (gVisor checkpoint/restore) with disk-only sleeps: Sleep and wake → first exec (see memory.go)")
	flag.StringVar(&cfg.userNS, "userns", "on", "hutchd's --userns (on: each runc sandbox in a user namespace of its own)")
	flag.BoolVar(&cfg.fairness, "fairness", false, "run the CPU fairness benchmark instead (an idle sandbox's exec round trip with a busy neighbour; see fairness.go)")
	flag.Parse()
	if cfg.n < 1 || cfg.m < 1 || cfg.hn < 1 {
		fmt.Fprintln(os.Stderr, "bench: -n, -m and -hn must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	runMode := run
	if cfg.headline {
		runMode = runHeadline
	}
	if cfg.code {
		runMode = runCode
	}
	if cfg.gvisor {
		runMode = runGVisor
	}
	if *egressFlag {
		runMode = runEgress // egress.go
	}
	if cfg.fairness {
		runMode = runFairness
	}
	if cfg.memory {
		runMode = runMemory
	}
	err := runMode(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func imagesDirDefault() string {
	if v := os.Getenv("HUTCH_IMAGES_DIR"); v != "" {
		return v
	}
	return "/var/lib/hutch/images"
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	it, root, work, cleanup, err := setup(cfg, "hutch-bench-", "runc", "nft", "bash", "go")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()

	bins := work + "/bin" // hutchd and hutch-init built by setup
	if err := daemontest.Build(root, bins, "previewtarget=./test/previewtarget"); err != nil {
		return err
	}
	progress("starting hutchd")
	d, err := startDaemon(ctx, bins, work, cfg.imagesDir, "--disk-quota", cfg.diskQuota, "--userns", cfg.userNS)
	if err != nil {
		return err
	}
	defer func() { err = stopDaemon(ctx, cfg, d, 2*time.Minute, err) }()
	c := d.Client()
	img, err := ensureImage(ctx, c, cfg.imagesDir)
	if err != nil {
		return err
	}
	raw, err := newRawRunc(work, img.RootFS, it.Resources())
	if err != nil {
		return err
	}
	defer func() {
		if rerr := raw.cleanupAll(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("raw runc cleanup: %w", rerr))
		}
	}()

	printEnv(out, cfg, it, img)
	b := &bench{cfg: cfg, c: c, raw: raw, d: d, tag: randomTag(),
		opts: &client.SandboxOptions{InstanceType: it.Name}}
	if err := b.coldCreate(ctx); err != nil {
		return interrupted(ctx, fmt.Errorf("cold create: %w", err))
	}
	if err := b.execRoundTrip(ctx); err != nil {
		return interrupted(ctx, fmt.Errorf("exec: %w", err))
	}
	if err := b.previewProxy(ctx, bins+"/previewtarget"); err != nil {
		return interrupted(ctx, fmt.Errorf("preview: %w", err))
	}
	b.report(out)
	return nil
}

// setup checks the machine (root, the tools), resolves the instance type and the module root,
// makes the run's work directory under prefix and builds hutchd and hutch-init into its bin/.
// cleanup removes it, unless something is still mounted below it or -keep was given.
func setup(cfg config, prefix string, tools ...string) (it sandbox.InstanceType, root, work string, cleanup func() error, err error) {
	if os.Geteuid() != 0 {
		return it, "", "", nil, errors.New("needs root (runc, mounts, network namespaces)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return it, "", "", nil, fmt.Errorf("%s is not installed: %w", tool, err)
		}
	}
	if it, err = sandbox.LookupInstanceType(cfg.instanceType); err != nil {
		return it, "", "", nil, err
	}
	if root, err = moduleRoot(); err != nil {
		return it, "", "", nil, err
	}
	if work, err = os.MkdirTemp("", prefix); err != nil {
		return it, "", "", nil, err
	}
	// hutchd's state dir is below it: with user namespaces (hutchd's default) sandboxes' roots
	// must be reachable from their namespaces (hutchd refuses to change directories it does not
	// own).
	if err := os.Chmod(work, 0o711); err != nil {
		return it, "", "", nil, err
	}
	progress("building hutchd and hutch-init")
	if err := daemontest.Build(root, filepath.Join(work, "bin"), "hutchd", "hutch-init"); err != nil {
		return it, "", "", nil, errors.Join(err, os.RemoveAll(work))
	}
	cleanup = func() error {
		// Never remove a directory with something still mounted below it.
		if m := mountsUnder(work); len(m) > 0 {
			return fmt.Errorf("left %s in place: still mounted: %v", work, m)
		}
		if cfg.keepWork {
			progress("work directory kept: %s", work)
			return nil
		}
		return os.RemoveAll(work)
	}
	return it, root, work, cleanup, nil
}

// interrupted replaces err by a plain message when the run was interrupted (Ctrl-C, SIGTERM).
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return err
}

// ensureImage builds the default image through c if imagesDir lacks it (minutes) and returns it.
func ensureImage(ctx context.Context, c *client.Client, imagesDir string) (image.Image, error) {
	progress("ensuring the default image (builds it if missing; minutes)")
	if _, err := c.BuildImage(ctx, image.DefaultName, func(line string) { progress("image: %s", line) }); err != nil {
		return image.Image{}, err
	}
	return image.NewStore(imagesDir, nil).Resolve(image.DefaultName)
}

func randomTag() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// printEnv prints what the figures depend on.
func printEnv(out io.Writer, cfg config, it sandbox.InstanceType, img image.Image) {
	var u unix.Utsname
	_ = unix.Uname(&u)
	runcVersion := "?"
	if b, err := exec.Command("runc", "--version").Output(); err == nil {
		runcVersion = strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)[0]
	}
	cgroup := "v1 (hybrid)"
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		cgroup = "v2"
	}
	fmt.Fprintf(out, "Hutch benchmark, %s\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(out, "  kernel:        %s %s\n", unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]))
	fmt.Fprintf(out, "  cpu:           %d cores, %s\n", goruntime.NumCPU(), cpuModel())
	fmt.Fprintf(out, "  cgroup:        %s\n", cgroup)
	fmt.Fprintf(out, "  runc:          %s\n", runcVersion)
	fmt.Fprintf(out, "  go:            %s\n", goruntime.Version())
	fmt.Fprintf(out, "  image:         %s (%s, %d packages)\n", img.ID, img.Suite, len(img.Packages))
	fmt.Fprintf(out, "  instance type: %s (cpu %dm, memory %d MiB, pids %d), baselines use the same limits\n",
		it.Name, it.MilliCPU, it.MemoryBytes>>20, it.Pids)
	fmt.Fprintf(out, "  iterations:    -n %d (cold create), -m %d (exec)\n", cfg.n, cfg.m)
	fmt.Fprintf(out, "  hutchd:        --disk-quota %s --userns %s\n", cfg.diskQuota, cfg.userNS)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// mountsUnder lists mount points below dir, from /proc/self/mountinfo.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}
