package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bareRepo makes a bare repository with one commit on main and one on branch "feature", and
// returns its file:// URL.
func bareRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	bare := filepath.Join(dir, "proj.git")
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("-C", work, "add", "README")
	run("-C", work, "commit", "-q", "-m", "one")
	run("-C", work, "checkout", "-q", "-b", "feature")
	if err := os.WriteFile(filepath.Join(work, "FEATURE"), []byte("f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("-C", work, "add", "FEATURE")
	run("-C", work, "commit", "-q", "-m", "two")
	run("-C", work, "checkout", "-q", "main")
	run("clone", "-q", "--bare", work, bare)
	return "file://" + bare
}

func TestGitCheckout(t *testing.T) {
	a := startAgent(t)
	repo := bareRepo(t)

	out := a.mustPost("/api/git/checkout", obj{"repoUrl": repo})
	target := filepath.Join(a.workdir, "proj")
	if out["targetDir"] != target || out["branch"] != "main" || out["repoUrl"] != repo {
		t.Fatalf("checkout = %v", out)
	}
	if b, err := os.ReadFile(filepath.Join(target, "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("README: %v %q", err, b)
	}

	out = a.mustPost("/api/git/checkout", obj{"repoUrl": repo, "branch": "feature", "targetDir": "feat", "depth": 1})
	if out["targetDir"] != filepath.Join(a.workdir, "feat") || out["branch"] != "feature" {
		t.Fatalf("checkout feature = %v", out)
	}
	if _, err := os.Stat(filepath.Join(a.workdir, "feat/FEATURE")); err != nil {
		t.Fatalf("feature branch not checked out: %v", err)
	}

	tests := []struct {
		name   string
		body   obj
		status int
		code   string
	}{
		{"missing repo", obj{"repoUrl": "file:///nonexistent/repo.git", "targetDir": "x1"}, 404, "GIT_REPOSITORY_NOT_FOUND"},
		{"missing branch", obj{"repoUrl": repo, "branch": "nope", "targetDir": "x2"}, 404, "GIT_BRANCH_NOT_FOUND"},
		{"target exists", obj{"repoUrl": repo}, 409, "GIT_TARGET_EXISTS"},
		{"option smuggling", obj{"repoUrl": "--upload-pack=touch /tmp/pwned"}, 400, "INVALID_GIT_URL"},
		{"ext transport", obj{"repoUrl": "ext::sh -c touch% /tmp/pwned"}, 400, "INVALID_GIT_URL"},
		{"no scheme", obj{"repoUrl": "/srv/repo.git"}, 400, "INVALID_GIT_URL"},
		{"bad branch", obj{"repoUrl": repo, "branch": "-x", "targetDir": "x3"}, 400, "VALIDATION_FAILED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := a.post("/api/git/checkout", tt.body)
			wantError(t, status, out, tt.status, tt.code)
		})
	}
	for _, d := range []string{"x1", "x2", "x3"} {
		if _, err := os.Stat(filepath.Join(a.workdir, d)); err == nil {
			t.Errorf("failed clone left %s behind", d)
		}
	}

	// Credentials in the URL never come back.
	status, eout := a.post("/api/git/checkout", obj{"repoUrl": "http://user:s3cret@127.0.0.1:1/repo.git", "targetDir": "x4", "timeoutMs": 20000})
	if status < 400 || strings.Contains(eout["message"].(string)+eout["context"].(obj)["stderr"].(string), "s3cret") {
		t.Fatalf("reply = %d %v; want an error without the password", status, eout)
	}
	if eout["code"] != "GIT_NETWORK_ERROR" {
		t.Fatalf("connection refused = %v; want GIT_NETWORK_ERROR", eout["code"])
	}
}
