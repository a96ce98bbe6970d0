// Package daemontest runs a real hutchd process for end-to-end tests and benchmarks: it builds
// the binaries, starts hutchd with a private state directory and the caller's flags, waits for
// its API, and stops it (SIGTERM), kills it (SIGKILL, as a crash would) or starts it again.
package daemontest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/client"
)

// Build builds ./cmd/<name> (and any other package path given as "name=./path") of the module
// at root into dir, with cgo off so hutch-init is static. The packages whose binary takes their
// directory's name build in one go command, so they compile and link in parallel.
func Build(root, dir string, names ...string) error {
	together := []string{}
	for _, n := range names {
		name, pkg, ok := strings.Cut(n, "=")
		if !ok {
			pkg = "./cmd/" + name
		}
		if path.Base(pkg) == name {
			together = append(together, pkg)
			continue
		}
		if err := goBuild(root, filepath.Join(dir, name), pkg); err != nil {
			return err
		}
	}
	if len(together) == 0 {
		return nil
	}
	// An -o that ends in a slash is a directory: each binary is named after its package.
	return goBuild(root, dir+string(filepath.Separator), together...)
}

func goBuild(root, out string, pkgs ...string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", out}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}

// FreeAddr returns a loopback address with a port free at the time of the call.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Daemon is one hutchd process (and its restarts).
type Daemon struct {
	Bins     string   // directory with hutchd and hutch-init
	StateDir string   // --state-dir
	Listen   string   // --listen
	LogPath  string   // hutchd's stdout and stderr, appended across restarts
	Args     []string // further flags
	// Token is the API token: read by Start from <StateDir>/token, unless the caller set it
	// (a hutchd started with --token-hash-file has no token file).
	Token string

	mu   sync.Mutex
	cmd  *exec.Cmd     // guarded by mu
	done chan struct{} // guarded by mu: closed when cmd has exited
	log  *os.File      // guarded by mu
}

// New returns a Daemon with a free listen address; the caller fills Args, then calls Start.
func New(bins, stateDir, logPath string) (*Daemon, error) {
	listen, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	return &Daemon{Bins: bins, StateDir: stateDir, Listen: listen, LogPath: logPath}, nil
}

// URL is hutchd's base URL.
func (d *Daemon) URL() string { return "http://" + d.Listen }

// Start launches hutchd (in its own process group, so a terminal's Ctrl-C reaches only the
// caller) and waits up to a minute for /v1/health; then it reads the API token (unless Token
// is set).
func (d *Daemon) Start(ctx context.Context) error {
	f, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	args := append([]string{
		"--state-dir", d.StateDir,
		"--listen", d.Listen,
		"--agent-binary", filepath.Join(d.Bins, "hutch-init"),
	}, d.Args...)
	if err := CloseInheritedOnExec(); err != nil {
		f.Close()
		return err
	}
	cmd := exec.Command(filepath.Join(d.Bins, "hutchd"), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start hutchd: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	d.mu.Lock()
	d.cmd, d.done, d.log = cmd, done, f
	d.mu.Unlock()

	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(d.URL() + "/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			d.Stop()
			return fmt.Errorf("hutchd did not become healthy; log:\n%s", d.LogTail())
		}
		select {
		case <-done:
			return fmt.Errorf("hutchd exited; log:\n%s", d.LogTail())
		case <-ctx.Done():
			d.Stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if d.Token != "" {
		return nil
	}
	tok, err := os.ReadFile(filepath.Join(d.StateDir, "token"))
	if err != nil {
		d.Stop()
		return err
	}
	d.Token = strings.TrimSpace(string(tok))
	return nil
}

// CloseInheritedOnExec marks every file descriptor of this process above standard error
// close-on-exec, so that no child it starts from then on gets one. Go opens its own files so;
// the others were inherited, such as the lock of `flock LOCKFILE go test …`, which a hutchd
// left running (its own process group outlives a killed test) would otherwise hold, keeping
// the next run waiting on the lock. Files handed to a child on purpose (exec.Cmd.ExtraFiles)
// are unaffected.
func CloseInheritedOnExec() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil || (!errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL)) {
		return err
	}
	return markEachOnExec() // kernels before 5.11
}

// markEachOnExec is CloseInheritedOnExec one descriptor at a time.
func markEachOnExec() error {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range fds {
		var fd int
		if _, err := fmt.Sscan(e.Name(), &fd); err != nil || fd < 3 {
			continue
		}
		// The descriptor ReadDir used is closed by now: EBADF is expected for it.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("mark fd %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}

// Pid is the running hutchd's process ID, 0 when it is not running.
func (d *Daemon) Pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil || d.cmd.Process == nil {
		return 0
	}
	select {
	case <-d.done:
		return 0
	default:
		return d.cmd.Process.Pid
	}
}

// Kill9 kills hutchd with SIGKILL, as a crash would, and waits for it.
func (d *Daemon) Kill9() { d.end(syscall.SIGKILL) }

// Stop ends hutchd with SIGTERM (SIGKILL after 30 s) and waits for it.
func (d *Daemon) Stop() { d.end(syscall.SIGTERM) }

func (d *Daemon) end(sig syscall.Signal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	d.log.Close()
	d.cmd = nil
}

// UnmountData unmounts the data volume hutchd mounted at <StateDir>/data (hutchd leaves it
// mounted when it stops, for the sandboxes it leaves running); its loop device goes with it.
// Call it after Stop, once no sandbox of the daemon is left. Not mounted is not an error.
func (d *Daemon) UnmountData() error {
	mp := filepath.Join(d.StateDir, "data")
	if err := unix.Unmount(mp, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
	}
	return nil
}

// Client returns an SDK client for this hutchd.
func (d *Daemon) Client() *client.Client {
	c, err := client.New(d.URL(), d.Token)
	if err != nil {
		panic(err) // URL() is always a valid http URL
	}
	return c
}

// LogTail returns the last 8000 bytes of hutchd's log.
func (d *Daemon) LogTail() string {
	b, _ := os.ReadFile(d.LogPath)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// DestroyAll destroys every sandbox of this hutchd.
func (d *Daemon) DestroyAll(ctx context.Context) error {
	c := d.Client()
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
