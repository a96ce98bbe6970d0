package agent

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
	"github.com/hutchdev/hutch/internal/testutil"
)

// A dir that resolves outside the allowed roots through a symlink is refused by both
// endpoints, and nothing outside is touched; a symlink that stays inside is followed.
func TestBackupSymlinkEscape(t *testing.T) {
	a := startAgent(t)
	// A directory outside every allowed root (/workspace, /home, /tmp, /var/tmp, /app): not the
	// package directory, which a checkout under /tmp would put inside one.
	outside, err := os.MkdirTemp("/var/lib", ".hutch-escape-test-")
	if err != nil {
		t.Skipf("needs a writable /var/lib (root): %v", err)
	}
	outside, _ = filepath.Abs(outside)
	t.Cleanup(func() { os.RemoveAll(outside) })
	must(t, os.MkdirAll(filepath.Join(outside, "apt"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "apt/sources"), []byte("precious"), 0o644))
	base := t.TempDir()
	link := filepath.Join(base, "link")
	must(t, os.Symlink(outside, link))
	must(t, os.MkdirAll(filepath.Join(base, "real"), 0o755))
	must(t, os.Symlink("real", filepath.Join(base, "in")))

	body, _ := json.Marshal(map[string]any{"dir": link})
	_, resp, data := a.archive(string(body))
	var env errdefs.Envelope
	if err := json.Unmarshal(data, &env); err != nil || env.Code != errdefs.CodeInvalidBackupConfig || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("archive through a symlink to %s: %d %s; want 400 INVALID_BACKUP_CONFIG", outside, resp.StatusCode, data)
	}

	tarball := func() io.Reader {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			_ = tw.WriteHeader(&tar.Header{Name: "new", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
			_, _ = tw.Write([]byte("x"))
			pw.CloseWithError(tw.Close())
		}()
		return pr
	}
	extract := func(dir string) (*http.Response, []byte) {
		resp, err := a.client.Post("http://agent/api/backup/extract?dir="+url.QueryEscape(dir), "application/x-tar", tarball())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, data = extract(filepath.Join(link, "apt"))
	if err := json.Unmarshal(data, &env); err != nil || env.Code != errdefs.CodeInvalidBackupConfig || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("extract through a symlink: %d %s; want 400 INVALID_BACKUP_CONFIG", resp.StatusCode, data)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "apt/sources")); err != nil || string(b) != "precious" {
		t.Errorf("outside after the refused extract: %q, %v", b, err)
	}
	// Inside the roots a symlink is followed: the content lands in the resolved directory.
	resp, data = extract(filepath.Join(base, "in/sub"))
	var rep agentapi.ExtractReply
	if err := json.Unmarshal(data, &rep); err != nil || resp.StatusCode != http.StatusOK || rep.Dir != filepath.Join(base, "real/sub") {
		t.Fatalf("extract through an inside symlink: %d %s", resp.StatusCode, data)
	}
	if _, err := os.Stat(filepath.Join(base, "real/sub/new")); err != nil {
		t.Error(err)
	}
	if fi, err := os.Lstat(filepath.Join(base, "in")); err != nil || fi.Mode().Type() != os.ModeSymlink {
		t.Errorf("the symlink was replaced: %v", err)
	}
}

// An extraction whose body stalls is cut when the agent shuts down: Serve returns only after
// the work directory is removed.
func TestBackupExtractCutAtShutdown(t *testing.T) {
	base := t.TempDir()
	sockDir, err := os.MkdirTemp("", "hagent")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	srv, err := New(Config{Workdir: filepath.Join(base, "workspace"), StateDir: filepath.Join(base, "state"),
		Env: os.Environ(), Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	ln, err := Listen(filepath.Join(sockDir, "a.sock"))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(sockDir, "a.sock"))
	}}
	defer tr.CloseIdleConnections()

	target := filepath.Join(base, "target")
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		tw := tar.NewWriter(pw)
		_ = tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20})
		_, _ = tw.Write(make([]byte, 1000)) // then stall
	}()
	reqDone := make(chan struct{})
	go func() {
		defer close(reqDone)
		resp, err := (&http.Client{Transport: tr}).Post("http://agent/api/backup/extract?dir="+url.QueryEscape(target), "application/x-tar", pr)
		if err == nil {
			resp.Body.Close()
		}
	}()
	if !testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool {
		names, _ := filepath.Glob(filepath.Join(base, ".hutch-restore-*"))
		return len(names) > 0
	}) {
		t.Fatal("the extraction did not start")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
	}
	if names, _ := filepath.Glob(filepath.Join(base, ".hutch-*")); len(names) > 0 {
		t.Errorf("work directories left after the shutdown: %v", names)
	}
	if _, err := os.Stat(target); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("target after a cut extraction: %v", err)
	}
	pw.CloseWithError(io.ErrClosedPipe)
	<-reqDone
}
