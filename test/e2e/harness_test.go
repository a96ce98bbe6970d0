// Package e2e tests hutchd end to end: real binaries (hutchd, hutch, hutch-init), real runc
// containers from the real default image, real network namespaces and nftables, a real SQLite
// file, and the Go SDK as the client. It needs root, runc and debootstrap; without them every
// test skips with the reason.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
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
	skipReason string
	bins       string // directory with the built binaries
	d          *daemon
	gitAddr    string // host address of the example's git server
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	switch {
	case os.Geteuid() != 0:
		skipReason = "needs root (runc, mounts, network namespaces)"
	case !have("runc"):
		skipReason = "runc is not installed (apt-get install runc)"
	case !have("debootstrap"):
		skipReason = "debootstrap is not installed (apt-get install debootstrap)"
	case !have("nft"):
		skipReason = "nft is not installed (apt-get install nftables)"
	}
	if skipReason != "" {
		fmt.Fprintln(os.Stderr, "e2e: skipping:", skipReason)
		return m.Run()
	}
	var err error
	bins, err = os.MkdirTemp("", "hutch-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bins)
	if err := buildBinaries(bins); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build:", err)
		return 1
	}
	gitAddr = freeAddr()
	d, err = startDaemon()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start hutchd:", err)
		return 1
	}
	// Build (or find) the default image once, with visible progress.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	if _, err := d.client().BuildImage(ctx, "default", func(line string) { fmt.Fprintln(os.Stderr, "image:", line) }); err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "e2e: image build:", err)
		d.stop()
		return 1
	}
	cancel()
	code := m.Run()
	if err := d.destroyAll(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cleanup:", err)
		code = 1
	}
	d.stop()
	d.cleanupState()
	return code
}

func requireEnv(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

func have(bin string) bool { _, err := exec.LookPath(bin); return err == nil }

func buildBinaries(dir string) error {
	builds := [][]string{
		{"go", "build", "-o", filepath.Join(dir, "hutchd"), "./cmd/hutchd"},
		{"go", "build", "-o", filepath.Join(dir, "hutch"), "./cmd/hutch"},
		{"go", "build", "-o", filepath.Join(dir, "hutch-init"), "./cmd/hutch-init"},
		{"go", "build", "-o", filepath.Join(dir, "agent-session"), "./examples/agent-session"},
	}
	for _, b := range builds {
		cmd := exec.Command(b[0], b[1:]...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(b, " "), err, out)
		}
	}
	return nil
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// daemon is a hutchd process under test.
type daemon struct {
	state  string
	listen string
	token  string

	mu   sync.Mutex
	cmd  *exec.Cmd     // guarded by mu
	done chan struct{} // closed when cmd exited; guarded by mu
	log  *os.File
}

func imagesDir() string {
	if v := os.Getenv("HUTCH_TEST_IMAGES"); v != "" {
		return v
	}
	return "/var/lib/hutch/images"
}

func startDaemon() (*daemon, error) {
	state, err := os.MkdirTemp("", "hutch-e2e-state-")
	if err != nil {
		return nil, err
	}
	dm := &daemon{state: state, listen: freeAddr()}
	if err := dm.start(); err != nil {
		return nil, err
	}
	tok, err := os.ReadFile(filepath.Join(state, "token"))
	if err != nil {
		return nil, err
	}
	dm.token = strings.TrimSpace(string(tok))
	return dm, nil
}

func (dm *daemon) args() []string {
	return []string{
		"--state-dir", dm.state,
		"--images-dir", imagesDir(),
		"--listen", dm.listen,
		"--agent-binary", filepath.Join(bins, "hutch-init"),
		"--if-prefix", ifPrefix,
		"--netns-prefix", nsPrefix,
		"--nft-table", nftTable,
		"--cgroup-parent", cgroupDir,
		"--subnet", subnet,
		"--dns-port", dnsPort,
		"--http-port", httpPort,
		"--tls-port", tlsPort,
		"--upstream", gitHost + "=" + gitAddr,
		"--log-level", "debug",
	}
}

// start launches hutchd and waits until its API answers.
func (dm *daemon) start() error {
	f, err := os.OpenFile(filepath.Join(dm.state, "hutchd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(bins, "hutchd"), dm.args()...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	dm.mu.Lock()
	dm.cmd, dm.log, dm.done = cmd, f, done
	dm.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + dm.listen + "/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("hutchd exited; log:\n%s", dm.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("hutchd did not become healthy; log:\n%s", dm.logTail())
}

// kill9 kills hutchd with SIGKILL, as a crash would.
func (dm *daemon) kill9() {
	dm.mu.Lock()
	defer dm.mu.Unlock()
	if dm.cmd != nil {
		dm.cmd.Process.Kill()
		<-dm.done
		dm.cmd = nil
		dm.log.Close()
	}
}

// stop ends hutchd with SIGTERM.
func (dm *daemon) stop() {
	dm.mu.Lock()
	defer dm.mu.Unlock()
	if dm.cmd != nil {
		dm.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-dm.done:
		case <-time.After(30 * time.Second):
			dm.cmd.Process.Kill()
			<-dm.done
		}
		dm.cmd = nil
		dm.log.Close()
	}
}

func (dm *daemon) url() string { return "http://" + dm.listen }

func (dm *daemon) client() *client.Client {
	c, err := client.New(dm.url(), dm.token)
	if err != nil {
		panic(err)
	}
	return c
}

func (dm *daemon) logTail() string {
	b, _ := os.ReadFile(filepath.Join(dm.state, "hutchd.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

func (dm *daemon) destroyAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := dm.client()
	list, err := c.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	for _, sb := range list {
		if err := c.SandboxHandle(sb.ID).Destroy(ctx); err != nil {
			return fmt.Errorf("destroy %s: %w", sb.ID, err)
		}
	}
	return nil
}

func (dm *daemon) cleanupState() {
	// Only remove the state dir when nothing is mounted below it.
	if m := mountsUnder(dm.state); len(m) == 0 {
		os.RemoveAll(dm.state)
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
	sb, err := d.client().Sandbox(ctx, id, opts)
	if err != nil {
		t.Fatalf("Sandbox(%q) = %v\nhutchd log:\n%s", id, err, d.logTail())
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
	return ctx
}

var _ = io.Discard
