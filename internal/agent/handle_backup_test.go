package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/reaper"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// archiveNames posts an archive request and returns the entry names, the reply and its body.
func (a *testAgent) archive(body string) ([]string, *http.Response, []byte) {
	a.t.Helper()
	resp, err := a.client.Post("http://agent/api/backup/archive", "application/json", strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp, data
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			a.t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	return names, resp, data
}

func TestBackupArchiveGitignore(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	a := startAgent(t)
	repo := filepath.Join(t.TempDir(), "repo")
	for p, c := range map[string]string{
		".gitignore": "dist/\n*.tmp\n", "src/a.js": "a", "dist/out.js": "built", "x.tmp": "tmp", "sub/y.tmp": "tmp",
	} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(repo, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(repo, p), []byte(c), 0o644))
	}
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	body, _ := json.Marshal(map[string]any{"dir": repo, "gitignore": true, "excludes": []string{".git"}})
	names, resp, _ := a.archive(string(body))
	if resp.StatusCode != http.StatusOK || resp.Header.Get(agentapi.HeaderWarning) != "" {
		t.Fatalf("status %d, warning %q", resp.StatusCode, resp.Header.Get(agentapi.HeaderWarning))
	}
	// sub/ holds only ignored files: git lists the directory itself (--directory).
	want := []string{"./", ".gitignore", "src/", "src/a.js"}
	if !slices.Equal(names, want) {
		t.Errorf("entries = %v, want %v", names, want)
	}
	var st struct{ Files int64 }
	if err := json.Unmarshal([]byte(resp.Trailer.Get(agentapi.TrailerArchiveStats)), &st); err != nil || st.Files != 2 {
		t.Errorf("stats trailer %q: %v", resp.Trailer.Get(agentapi.TrailerArchiveStats), err)
	}

	// Not a repository: a warning, and nothing is excluded by git.
	plain := filepath.Join(t.TempDir(), "plain")
	must(t, os.MkdirAll(plain, 0o755))
	must(t, os.WriteFile(filepath.Join(plain, "x.tmp"), []byte("x"), 0o644))
	body, _ = json.Marshal(map[string]any{"dir": plain, "gitignore": true})
	names, resp, _ = a.archive(string(body))
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get(agentapi.HeaderWarning), "not in a git work tree") {
		t.Errorf("status %d, warning %q", resp.StatusCode, resp.Header.Get(agentapi.HeaderWarning))
	}
	if !slices.Equal(names, []string{"./", "x.tmp"}) {
		t.Errorf("entries = %v", names)
	}
}

func TestBackupEndpointsErrors(t *testing.T) {
	a := startAgent(t)
	base := t.TempDir()
	must(t, os.WriteFile(filepath.Join(base, "file"), []byte("x"), 0o644))
	for _, c := range []struct {
		body string
		code errdefs.Code
	}{
		{`{"dir":"` + filepath.Join(base, "missing") + `"}`, errdefs.CodeFileNotFound},
		{`{"dir":"` + filepath.Join(base, "file") + `"}`, errdefs.CodeNotDirectory},
		{`{"dir":"relative"}`, errdefs.CodeInvalidPath},
		{`{"dir":"` + base + `","excludes":["[bad"]}`, errdefs.CodeInvalidArgument},
	} {
		_, resp, data := a.archive(c.body)
		var env errdefs.Envelope
		if err := json.Unmarshal(data, &env); err != nil || env.Code != c.code || resp.StatusCode != c.code.HTTPStatus() {
			t.Errorf("%s: %d %s; want %s", c.body, resp.StatusCode, data, c.code)
		}
	}

	// Extract: a good archive, then an unsafe one (the target keeps the first's content).
	target := filepath.Join(base, "target")
	extract := func(data []byte) (*http.Response, []byte) {
		resp, err := a.client.Post("http://agent/api/backup/extract?dir="+url.QueryEscape(target), "application/x-tar", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	tarOf := func(name, content string, typ byte, link string) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		must(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Linkname: link, Mode: 0o644, Size: int64(len(content))}))
		_, _ = tw.Write([]byte(content))
		must(t, tw.Close())
		return buf.Bytes()
	}
	resp, body := extract(tarOf("hello.txt", "hi", tar.TypeReg, ""))
	var rep agentapi.ExtractReply
	if err := json.Unmarshal(body, &rep); err != nil || resp.StatusCode != 200 || !rep.Success || rep.Files != 1 || rep.Dir != target {
		t.Fatalf("extract: %d %s", resp.StatusCode, body)
	}
	resp, body = extract(tarOf("../evil", "x", tar.TypeReg, ""))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "unsafe archive entry") {
		t.Errorf("unsafe: %d %s", resp.StatusCode, body)
	}
	if b, err := os.ReadFile(filepath.Join(target, "hello.txt")); err != nil || string(b) != "hi" {
		t.Errorf("target after a refused extract: %q, %v", b, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestBackupGitignoreRunsNoHook: the repository's own configuration does not make the agent's
// git run a program (a breaker's core.fsmonitor hook ran in the agent's process group, which
// gVisor's guard never kills, and started busy loops there).
func TestBackupGitignoreRunsNoHook(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	a := startAgent(t)
	repo := filepath.Join(t.TempDir(), "repo")
	must(t, os.MkdirAll(repo, 0o755))
	must(t, os.WriteFile(filepath.Join(repo, "a"), []byte("a"), 0o644))
	mark := filepath.Join(t.TempDir(), "ran")
	hook := filepath.Join(t.TempDir(), "fsmonitor")
	must(t, os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+mark+"\nexit 1\n"), 0o755))
	for _, args := range [][]string{
		{"init", "-q", repo},
		{"-C", repo, "add", "a"},
		{"-C", repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x"},
		{"-C", repo, "config", "core.fsmonitor", hook},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	os.Remove(mark) // the commit may have run it
	body, _ := json.Marshal(map[string]any{"dir": repo, "gitignore": true, "excludes": []string{".git"}})
	if _, resp, data := a.archive(string(body)); resp.StatusCode != http.StatusOK {
		t.Fatalf("archive: status %d: %s", resp.StatusCode, data)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("the repository's core.fsmonitor hook ran for the backup's git ls-files")
	}
}

// TestBackupGitignoreRunsDemoted: a backup's git ls-files runs under the agent's tool shim, at
// the commands' nice and oom_score_adj (it may run the repository's programs, and a huge work
// tree costs much CPU). A wrapper first in the agent's PATH records what git was started at.
func TestBackupGitignoreRunsDemoted(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	if n, err := unix.Getpriority(unix.PRIO_PROCESS, 0); err != nil || 20-n == reaper.CommandNice {
		t.Skipf("the test runs at nice %d already (%v): a demotion could not be seen", 20-n, err)
	}
	shim := buildShimArgv(t)
	shim = []string{shim[0], "shim", "--"}
	repo := filepath.Join(t.TempDir(), "repo")
	must(t, os.MkdirAll(repo, 0o755))
	must(t, os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("*.tmp\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(repo, "x.tmp"), []byte("x"), 0o644))
	if out, err := exec.Command(real, "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	bin := t.TempDir()
	mark := filepath.Join(t.TempDir(), "prio")
	wrapper := "#!/bin/sh\necho \"$(cut -d' ' -f19 /proc/$$/stat) $(cat /proc/$$/oom_score_adj)\" > " + mark + "\nexec " + real + " \"$@\"\n"
	must(t, os.WriteFile(filepath.Join(bin, "git"), []byte(wrapper), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	paths, warning := gitIgnored(context.Background(), repo, shim)
	if warning != "" || !slices.Equal(paths, []string{"x.tmp"}) {
		t.Fatalf("gitIgnored = %q, %q; want [x.tmp]", paths, warning)
	}
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatalf("the git wrapper did not run: %v", err)
	}
	if got, want := strings.Fields(string(b)), []string{fmt.Sprint(reaper.CommandNice), reaper.CommandOOMScoreAdj}; !slices.Equal(got, want) {
		t.Errorf("git ls-files ran at nice and oom_score_adj %q; want %q", got, want)
	}
}
