package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/client"
)

// Names and ports of the benchmark's hutchd, distinct from a production hutchd and from the
// e2e tests' daemon, so the benchmark can run next to either.
const (
	ifPrefix = "hbn"
	nsPrefix = "hutchbench-"
	nftTable = "hutchbench"
	subnet   = "10.90.0.0/16"
	dnsPort  = "45053"
	httpPort = "45001"
	tlsPort  = "45002"
)

// moduleRoot returns the directory of the module's go.mod (the repository root).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the hutch module: run from the repository (go run ./test/bench)")
	}
	return filepath.Dir(mod), nil
}

// buildBinaries builds hutchd and hutch-init (static) into dir.
func buildBinaries(root, dir string) error {
	for _, b := range [][]string{
		{"go", "build", "-o", filepath.Join(dir, "hutchd"), "./cmd/hutchd"},
		{"go", "build", "-o", filepath.Join(dir, "hutch-init"), "./cmd/hutch-init"},
	} {
		cmd := exec.Command(b[0], b[1:]...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(b, " "), err, out)
		}
	}
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// daemon is the benchmark's own hutchd process.
type daemon struct {
	state   string // --state-dir
	listen  string
	logPath string
	token   string
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	logFile *os.File
}

// startDaemon starts hutchd with a private state dir under work and waits for /v1/health.
func startDaemon(ctx context.Context, bins, work, imagesDir string) (*daemon, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	d := &daemon{state: filepath.Join(work, "state"), listen: listen}
	if err := os.MkdirAll(d.state, 0o700); err != nil {
		return nil, err
	}
	d.logPath = filepath.Join(work, "hutchd.log")
	d.logFile, err = os.Create(d.logPath)
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(filepath.Join(bins, "hutchd"),
		"--state-dir", d.state,
		"--images-dir", imagesDir,
		"--listen", d.listen,
		"--agent-binary", filepath.Join(bins, "hutch-init"),
		"--if-prefix", ifPrefix,
		"--netns-prefix", nsPrefix,
		"--nft-table", nftTable,
		"--cgroup-parent", "hutchbench",
		"--subnet", subnet,
		"--dns-port", dnsPort,
		"--http-port", httpPort,
		"--tls-port", tlsPort,
		"--log-level", "debug",
	)
	d.cmd.Stdout, d.cmd.Stderr = d.logFile, d.logFile
	// Its own process group: a Ctrl-C on the terminal reaches the benchmark only, which then
	// destroys the sandboxes before it stops hutchd.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.logFile.Close()
		return nil, fmt.Errorf("start hutchd: %w", err)
	}
	d.done = make(chan struct{})
	go func() { d.cmd.Wait(); close(d.done) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + d.listen + "/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("hutchd did not become healthy; log:\n%s", d.logTail())
		}
		select {
		case <-d.done:
			return nil, fmt.Errorf("hutchd exited; log:\n%s", d.logTail())
		case <-ctx.Done():
			d.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	tok, err := os.ReadFile(filepath.Join(d.state, "token"))
	if err != nil {
		d.stop()
		return nil, err
	}
	d.token = strings.TrimSpace(string(tok))
	return d, nil
}

func (d *daemon) client() (*client.Client, error) {
	return client.New("http://"+d.listen, d.token)
}

// stop ends hutchd with SIGTERM (SIGKILL after 30 s).
func (d *daemon) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	d.logFile.Close()
	d.cmd = nil
}

func (d *daemon) logTail() string {
	b, _ := os.ReadFile(d.logPath)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// destroyAll destroys every sandbox of the benchmark's hutchd.
func (d *daemon) destroyAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := d.client()
	if err != nil {
		return err
	}
	list, err := c.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, sb := range list {
		if err := c.SandboxHandle(sb.ID).Destroy(ctx); err != nil {
			errs = append(errs, fmt.Errorf("destroy %s: %w", sb.ID, err))
		}
	}
	return errors.Join(errs...)
}
