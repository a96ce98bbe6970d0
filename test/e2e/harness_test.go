// Package e2e tests hutchd end to end: real binaries (hutchd, hutch, hutch-init), real runc
// containers from the real default image, real network namespaces and nftables, a real SQLite
// file, and the Go SDK as the client. It needs root, runc and debootstrap; without them every
// test skips with the reason.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/daemontest"
	"github.com/hutchdev/hutch/internal/testutil"
)

// Names and addresses of the test daemon, distinct from a hutchd the README may have started.
const (
	ifPrefix  = "hse"
	nsPrefix  = "hutche2e-"
	nftTable  = "hutche2e"
	subnet    = "10.89.0.0/16"
	dnsPort   = "35053"
	httpPort  = "35001"
	tlsPort   = "35002"
	gitHost   = "git.internal"
	repoRoot  = "../.."
	cgroupDir = "hutche2e"
)

var (
	skipReason  string
	bins        string // directory with the built binaries
	d           *daemontest.Daemon
	gitAddr     string // host address of the example's git server
	previewAddr string // the test hutchd's preview listener
	// defaultRuntime is the runtime of sandboxes created without one: hutchd's --runtime,
	// from HUTCH_TEST_RUNTIME ("runc" when unset, or "gvisor"). scripts/test.sh runs a core
	// subset of the suite a second time with HUTCH_TEST_RUNTIME=gvisor.
	defaultRuntime = "runc"
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	skipReason = testutil.MainRequiresRoot("runc, mounts, network namespaces")
	switch {
	case skipReason != "":
	case !have("runc"):
		skipReason = "runc is not installed (apt-get install runc)"
	case !have("debootstrap"):
		skipReason = "debootstrap is not installed (apt-get install debootstrap)"
	case !have("nft"):
		skipReason = "nft is not installed (apt-get install nftables)"
	}
	switch rt := os.Getenv("HUTCH_TEST_RUNTIME"); rt {
	case "", "runc":
	case "gvisor":
		defaultRuntime = rt
		if skipReason == "" && !have("runsc") {
			skipReason = "HUTCH_TEST_RUNTIME=gvisor but runsc is not installed (scripts/host-setup.sh installs it)"
		}
	default:
		fmt.Fprintf(os.Stderr, "e2e: HUTCH_TEST_RUNTIME=%q: want runc or gvisor\n", rt)
		return 2
	}
	if skipReason != "" {
		fmt.Fprintln(os.Stderr, "e2e: skipping:", skipReason)
		return m.Run()
	}
	if err := installSpecTransport(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	var err error
	bins, err = os.MkdirTemp("", "hutch-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bins)
	if err := daemontest.Build(repoRoot, bins, "hutchd", "hutch", "hutch-init", "agent-session=./examples/agent-session", "previewtarget=./test/previewtarget", "dev-server=./examples/dev-server"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build:", err)
		return 1
	}
	if gitAddr, err = daemontest.FreeAddr(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if previewAddr, err = daemontest.FreeAddr(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d, err = startDaemon()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start hutchd:", err)
		return 1
	}
	// Build (or find) the default image once, with visible progress.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	if _, err := d.Client().BuildImage(ctx, "default", func(line string) { fmt.Fprintln(os.Stderr, "image:", line) }); err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "e2e: image build:", err)
		d.Stop()
		cleanupState(d)
		return 1
	}
	cancel()
	code := m.Run()
	dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer dcancel()
	if err := d.DestroyAll(dctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cleanup:", err)
		code = 1
	}
	d.Stop()
	cleanupState(d)
	if !spec.report() {
		code = 1
	}
	return code
}

func requireEnv(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// parallel lets t run beside the suite's other parallel tests. Only a test that uses
// sandboxes of its own, never stops, restarts or reconfigures the shared hutchd, reads no
// host-wide count (file descriptors, runc containers, loop devices, network namespaces, the
// host's free space, hutchd's log size) and is not CPU-sensitive calls it. Go runs the parallel
// tests after every other one has ended, so the containment, memory-guard and restart tests
// still have the daemon and the CPUs alone. Most of an end-to-end test's time is spent waiting
// on sandboxes, not computing, which is what running them side by side saves.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// skipOnGVisor skips t when the suite's default runtime is gvisor (HUTCH_TEST_RUNTIME=gvisor),
// with why the test cannot apply there. Tests that choose their runtime themselves (the escape
// and containment suites, TestGVisor) never need it.
func skipOnGVisor(t *testing.T, why string) {
	t.Helper()
	if defaultRuntime == "gvisor" {
		t.Skip("not on gVisor: " + why)
	}
}

func have(bin string) bool { _, err := exec.LookPath(bin); return err == nil }

func imagesDir() string {
	if v := os.Getenv("HUTCH_TEST_IMAGES"); v != "" {
		return v
	}
	return "/var/lib/hutch/images"
}

// startDaemon starts the test hutchd: a temp state dir, the shared image dir, and names, ports
// and a cgroup parent of its own.
func startDaemon() (*daemontest.Daemon, error) {
	state, err := os.MkdirTemp("", "hutch-e2e-state-")
	if err != nil {
		return nil, err
	}
	dm, err := daemontest.New(bins, state, filepath.Join(state, "hutchd.log"))
	if err != nil {
		return nil, err
	}
	dm.Args = []string{
		"--images-dir", imagesDir(),
		"--if-prefix", ifPrefix,
		"--netns-prefix", nsPrefix,
		"--nft-table", nftTable,
		"--cgroup-parent", cgroupDir,
		"--subnet", subnet,
		"--dns-port", dnsPort,
		"--http-port", httpPort,
		"--tls-port", tlsPort,
		"--upstream", gitHost + "=" + gitAddr,
		"--preview-listen", previewAddr,
		"--log-level", "debug",
		"--data-volume-size", "12G",
		"--runtime", defaultRuntime,
	}
	return dm, dm.Start(context.Background())
}

// cleanupState removes the daemon's state dir, unless something is still mounted below it.
func cleanupState(dm *daemontest.Daemon) {
	if err := dm.UnmountData(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cleanup:", err)
	}
	if m := mountsUnder(dm.StateDir); len(m) == 0 {
		os.RemoveAll(dm.StateDir)
	}
}

// mountsUnder lists mount points below dir, from /proc/self/mountinfo.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	return out
}

// sandbox gets (or creates) a sandbox for one test and destroys it when the test ends.
func sandbox(t *testing.T, id string, opts *client.SandboxOptions) *client.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := d.Client().Sandbox(ctx, id, opts)
	if err != nil {
		t.Fatalf("Sandbox(%q) = %v\nhutchd log:\n%s", id, err, d.LogTail())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("Destroy(%q) = %v", id, err)
		}
	})
	return sb
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return withTest(ctx, t)
}
