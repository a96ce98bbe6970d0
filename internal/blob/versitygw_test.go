package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/testutil"
)

// versitygwVersion is the S3-compatible server the S3 tests start, built from the Go module
// proxy once per machine and cached.
const versitygwVersion = "v1.8.0"

// testCacheDir is where test tools are cached: $HUTCH_TEST_CACHE, else /var/cache/hutch-test,
// else the user cache directory.
func testCacheDir() string {
	if d := os.Getenv("HUTCH_TEST_CACHE"); d != "" {
		return d
	}
	if err := os.MkdirAll("/var/cache/hutch-test", 0o755); err == nil && syscall.Access("/var/cache/hutch-test", 2) == nil {
		return "/var/cache/hutch-test"
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "hutch-test-cache")
	}
	return filepath.Join(d, "hutch-test")
}

var versitygwOnce struct {
	sync.Once
	bin  string
	skip string
}

// versitygwBinary returns the cached versitygw binary, building it with `go install` into
// <cache>/bin/versitygw-<version>/ on first use (a file lock keeps parallel test processes from
// building it twice). It skips the test if the build fails (no network, say).
func versitygwBinary(t *testing.T) string {
	t.Helper()
	versitygwOnce.Do(func() {
		versitygwOnce.bin, versitygwOnce.skip = buildVersitygw(t)
	})
	if versitygwOnce.skip != "" {
		t.Skip(versitygwOnce.skip)
	}
	return versitygwOnce.bin
}

func buildVersitygw(t *testing.T) (bin, skip string) {
	dir := filepath.Join(testCacheDir(), "bin", "versitygw-"+versitygwVersion)
	bin = filepath.Join(dir, "versitygw")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return bin, ""
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Sprintf("versitygw: cache directory: %v", err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Sprintf("versitygw: lock: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Sprintf("versitygw: lock: %v", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, "" // built by another process meanwhile
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
		if _, err := os.Stat(goBin); err != nil {
			return "", "versitygw: no go toolchain to build it with"
		}
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", fmt.Sprintf("versitygw: %v", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "install", "github.com/versity/versitygw/cmd/versitygw@"+versitygwVersion)
	cmd.Dir = tmp // outside any module
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Sprintf("versitygw %s could not be built (no network to the Go module proxy?): %v\n%s", versitygwVersion, err, lastLines(out, 20))
	}
	t.Logf("built versitygw %s in %s (cached at %s)", versitygwVersion, time.Since(start).Round(time.Second), bin)
	if err := os.Rename(filepath.Join(tmp, "versitygw"), bin); err != nil {
		return "", fmt.Sprintf("versitygw: %v", err)
	}
	return bin, ""
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}

// versitygw is a running S3 server on loopback.
type versitygw struct {
	endpoint       string // 127.0.0.1:port
	access, secret string
	root           string // its posix backend directory
}

// startVersitygw starts versitygw on a free loopback port with a posix backend in a temp dir
// and stops it when the test ends.
func startVersitygw(t *testing.T) *versitygw {
	t.Helper()
	bin := versitygwBinary(t)
	v := &versitygw{access: "hutchtestaccess", secret: "hutchtestsecret0123456789", root: t.TempDir()}
	var lastErr error
	for range 3 { // the free port may be taken between probing and binding
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		v.endpoint = l.Addr().String()
		l.Close()
		var out bytes.Buffer
		cmd := exec.Command(bin, "--access", v.access, "--secret", v.secret, "--port", v.endpoint, "--quiet", "posix", v.root)
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start versitygw: %v", err)
		}
		exited := make(chan struct{}) // closed once cmd.Wait returned waitErr
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(exited) }()
		if lastErr = waitHTTP(t, v.endpoint, exited); lastErr == nil {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			t.Logf("versitygw: %s --access %s --secret *** --port %s --quiet posix %s", bin, v.access, v.endpoint, v.root)
			return v
		}
		cmd.Process.Kill()
		<-exited
		lastErr = fmt.Errorf("%w (wait: %v); output:\n%s", lastErr, waitErr, out.String())
	}
	t.Fatalf("versitygw did not come up: %v", lastErr)
	return nil
}

// waitHTTP waits up to 20 s until something answers HTTP at addr; it returns an error when
// none did, or when exited closed first (the process ended).
func waitHTTP(t *testing.T, addr string, exited <-chan struct{}) error {
	t.Helper()
	c := &http.Client{Timeout: time.Second}
	gone := false
	up := testutil.Poll(t, 50*time.Millisecond, 20*time.Second, func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
		}
		resp, err := c.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	switch {
	case gone:
		return errors.New("versitygw exited")
	case !up:
		return fmt.Errorf("no answer on %s within 20 s", addr)
	}
	return nil
}
