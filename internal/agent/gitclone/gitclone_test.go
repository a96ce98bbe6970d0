package gitclone

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

func TestValidateURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://github.com/a/b.git": true, "http://h/r": true, "git://h/r": true, "ssh://git@h/r": true,
		"file:///srv/r.git": true, "git@github.com:a/b.git": true,
		"": false, "-oProxyCommand=x": false, "--upload-pack=x": false, "ext::sh -c x": false,
		"ftp://h/r": false, "/srv/r.git": false, "https://": false, "fd::3": false,
		"git@github.com:-oProxy/b": false,
	} {
		err := ValidateURL(u)
		if ok != (err == nil) {
			t.Errorf("ValidateURL(%q) = %v; want ok=%v", u, err, ok)
		}
		if err != nil && !errdefs.IsCode(err, errdefs.CodeInvalidGitURL) {
			t.Errorf("ValidateURL(%q) code = %s", u, errdefs.CodeOf(err))
		}
	}
}

func TestRepoName(t *testing.T) {
	for u, want := range map[string]string{
		"https://github.com/a/b.git": "b", "https://github.com/a/b/": "b", "git@github.com:a/c.git": "c",
		"file:///srv/repo.git": "repo", "https://h": "repo",
	} {
		if got := RepoName(u); got != want {
			t.Errorf("RepoName(%q) = %q; want %q", u, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	in := "fatal: unable to access 'https://user:tok3n@github.com/a/b.git/': 403 and git://x@h/r"
	got := Redact(in)
	if strings.Contains(got, "tok3n") || strings.Contains(got, "user:") || !strings.Contains(got, "https://***@github.com") ||
		!strings.Contains(got, "git://***@h/r") {
		t.Fatalf("Redact = %q", got)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		stderr string
		want   errdefs.Code
	}{
		{"remote: Repository not found.\nfatal: repository 'https://github.com/a/b.git/' not found", errdefs.CodeGitRepoNotFound},
		{"fatal: '/x' does not appear to be a git repository", errdefs.CodeGitRepoNotFound},
		{"fatal: unable to access 'https://h/r/': The requested URL returned error: 404", errdefs.CodeGitRepoNotFound},
		{"fatal: Remote branch nope not found in upstream origin", errdefs.CodeGitBranchNotFound},
		{"fatal: Authentication failed for 'https://h/r/'", errdefs.CodeGitAuthFailed},
		{"fatal: could not read Username for 'https://github.com': terminal prompts disabled", errdefs.CodeGitAuthFailed},
		{"fatal: unable to access 'https://h/r/': The requested URL returned error: 403", errdefs.CodeGitAuthFailed},
		{"git@h: Permission denied (publickey).", errdefs.CodeGitAuthFailed},
		{"fatal: unable to access 'https://nohost/r/': Could not resolve host: nohost", errdefs.CodeGitNetwork},
		{"fatal: unable to access 'http://127.0.0.1:1/r/': Failed to connect to 127.0.0.1 port 1: Connection refused", errdefs.CodeGitNetwork},
		{"fatal: destination path 'x' already exists and is not an empty directory.", errdefs.CodeGitTargetExists},
		{"fatal: something else", errdefs.CodeGitCloneFailed},
	}
	for _, tt := range tests {
		if got := Classify(tt.stderr); got != tt.want {
			t.Errorf("Classify(%q) = %s; want %s", tt.stderr, got, tt.want)
		}
	}
}

// A server that accepts and never answers: the clone must time out as a network error and
// leave no git process behind.
func TestCloneTimeout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	dir := t.TempDir()
	start := time.Now()
	_, err = Clone(context.Background(), Options{
		URL: "http://" + ln.Addr().String() + "/r.git", TargetDir: filepath.Join(dir, "r"),
		Timeout: time.Second, Dir: dir, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir},
	})
	if !errdefs.IsCode(err, errdefs.CodeGitNetwork) {
		t.Fatalf("Clone = %v; want GIT_NETWORK_ERROR", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	out, _ := exec.Command("pgrep", "-f", ln.Addr().String()).Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("git processes left: %s", out)
	}
}
