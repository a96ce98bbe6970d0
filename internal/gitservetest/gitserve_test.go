package gitservetest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func TestServeClone(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	project := fstest.MapFS{
		"package.json":     {Data: []byte(`{"name":"demo"}` + "\n"), Mode: 0o644},
		"bin/run.sh":       {Data: []byte("#!/bin/sh\necho hi\n"), Mode: 0o755},
		"test/sum.test.js": {Data: []byte("// test\n"), Mode: 0o644},
	}
	s, err := Serve(ctx, project, "demo.git", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	root := s.root
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || !strings.HasSuffix(s.URL(), "/demo.git") {
		t.Errorf("URL() = %q", s.URL())
	}

	dst := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.CommandContext(ctx, "git", "clone", "-q", "--depth", "1", s.URL(), dst).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v: %s", err, out)
	}
	for name, f := range project {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != string(f.Data) {
			t.Errorf("%s = %q, %v; want %q", name, got, err, f.Data)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "bin/run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("bin/run.sh mode = %v, %v; want executable", fi.Mode(), err)
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", dst, "rev-parse", "--abbrev-ref", "HEAD").Output(); err != nil || strings.TrimSpace(string(out)) != "main" {
		t.Errorf("branch = %q, %v; want main", out, err)
	}
	// Pushes are refused.
	push := exec.CommandContext(ctx, "git", "-C", dst, "-c", "user.name=t", "-c", "user.email=t@t.invalid",
		"commit", "-q", "--allow-empty", "-m", "x")
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("commit: %v: %s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", dst, "push", "-q", "origin", "main").CombinedOutput(); err == nil {
		t.Errorf("push succeeded; want refused: %s", out)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("repository directory %s still exists after Close (%v)", root, err)
	}
	if out, err := exec.CommandContext(ctx, "git", "ls-remote", s.URL()).CombinedOutput(); err == nil {
		t.Errorf("ls-remote after Close succeeded: %s", out)
	}
}

func TestServeBadName(t *testing.T) {
	for _, name := range []string{"", "a/b.git", "..", "."} {
		if s, err := Serve(context.Background(), fstest.MapFS{}, name, "127.0.0.1:0"); err == nil {
			s.Close()
			t.Errorf("Serve(name %q) succeeded; want an error", name)
		}
	}
}
