package gitclone

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/reaper"
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

// TestCloneHooksRunApart: a hook the sandbox configured (core.hooksPath in its global git
// config) runs in a session of its own, not the agent's: from the agent's session it could
// join the agent's process group, which gVisor's guard never kills (a breaker's finding).
func TestCloneHooksRunApart(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	// Field 5 of /proc/self/stat is the process group, 6 the session (the command name "(sh)"
	// has no space).
	r := repoWithHook(t, "", "read -r pid comm state ppid pgrp sid rest < /proc/$$/stat\necho \"$pgrp $sid\"")
	mark := r.mark
	_, err := Clone(context.Background(), r.options(nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	var pgrp, sid int
	if _, err := fmt.Sscan(string(b), &pgrp, &sid); err != nil {
		t.Fatalf("hook ids %q: %v", b, err)
	}
	own, _ := unix.Getsid(0)
	if sid == own || pgrp == syscall.Getpgrp() {
		t.Errorf("the hook ran in session %d, group %d: the agent's are %d, %d", sid, pgrp, own, syscall.Getpgrp())
	}
}

// TestCloneRunsDemoted: under the agent's shim, git and what it runs (a hook here; filters,
// credential helpers and fsmonitor alike) run at the commands' nice and oom_score_adj, not at
// the agent's, for the clone and for the branch lookup after it.
func TestCloneRunsDemoted(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	if n, err := unix.Getpriority(unix.PRIO_PROCESS, 0); err != nil || 20-n == reaper.CommandNice {
		t.Skipf("the test runs at nice %d already (%v): a demotion could not be seen", 20-n, err)
	}
	bin := filepath.Join(t.TempDir(), "hutch-init")
	build := exec.Command("go", "build", "-o", bin, "github.com/hutchdev/hutch/cmd/hutch-init")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("cannot build hutch-init: %v\n%s", err, out)
	}
	// Field 19 of /proc/<pid>/stat is the nice value (the command name "(sh)" has no space).
	r := repoWithHook(t, "trunk", `echo "$(cut -d' ' -f19 /proc/$$/stat) $(cat /proc/$$/oom_score_adj)"`)
	mark := r.mark
	res, err := Clone(context.Background(), r.options([]string{bin, "shim", "--"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Branch != "trunk" {
		t.Errorf("branch %q; want trunk (git branch --show-current under the shim)", res.Branch)
	}
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	if got, want := strings.Fields(string(b)), []string{fmt.Sprint(reaper.CommandNice), reaper.CommandOOMScoreAdj}; !slices.Equal(got, want) {
		t.Errorf("the clone's hook ran at nice and oom_score_adj %q; want %q", got, want)
	}
}

// hookRepo is a local repository to clone, and a global git config whose post-checkout hook
// writes what its script prints to mark.
type hookRepo struct {
	dir, src, global, mark string
}

// repoWithHook makes a hookRepo with one empty commit on branch (git's default when ""), whose
// hook runs script (sh) and writes its output to the mark file.
func repoWithHook(t *testing.T, branch, script string) hookRepo {
	t.Helper()
	dir := t.TempDir()
	r := hookRepo{dir: dir, src: filepath.Join(dir, "src"), global: filepath.Join(dir, "gitconfig"), mark: filepath.Join(dir, "hook-out")}
	initArgs := []string{"init", "-q", r.src}
	if branch != "" {
		initArgs = []string{"init", "-q", "-b", branch, r.src}
	}
	for _, args := range [][]string{
		initArgs,
		{"-C", r.src, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	hooks := filepath.Join(dir, "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	hook := "#!/bin/sh\n{\n" + script + "\n} > " + r.mark + "\n"
	if err := os.WriteFile(filepath.Join(hooks, "post-checkout"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.global, []byte("[core]\n\thooksPath = "+hooks+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// options clones the repository into dir/clone with the hook's config, under shim when set.
func (r hookRepo) options(shim []string) Options {
	return Options{
		URL: "file://" + r.src, TargetDir: filepath.Join(r.dir, "clone"), Dir: r.dir, Shim: shim,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + r.dir, "GIT_CONFIG_GLOBAL=" + r.global},
	}
}
