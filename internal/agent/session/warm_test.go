package session

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// sessionOf returns session id of m (DefaultID included before its first use).
func sessionOf(t *testing.T, m *Manager, id string) *Session {
	t.Helper()
	if id == DefaultID {
		return m.def
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[id]
	if s == nil {
		t.Fatalf("no session %q", id)
	}
	return s
}

// waitWarm waits until session id has a warm shell and returns it (without taking it).
func waitWarm(t *testing.T, m *Manager, id string) *shell {
	t.Helper()
	s := sessionOf(t, m, id)
	var sh *shell
	if !testutil.Poll(t, 2*time.Millisecond, 10*time.Second, func() bool {
		s.mu.Lock()
		sh = s.warm
		s.mu.Unlock()
		return sh != nil
	}) {
		t.Fatalf("session %q got no warm shell", id)
	}
	return sh
}

// waitIdle waits until no warm shell of session s is being started.
func waitIdle(t *testing.T, s *Session) {
	t.Helper()
	if !testutil.Poll(t, 2*time.Millisecond, 10*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.warming == nil
	}) {
		t.Fatal("a warm shell is still starting")
	}
}

// waitGone waits until no process carries MarkerEnv=execID.
func waitGone(t *testing.T, execID string) {
	t.Helper()
	var left []int
	if !testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool {
		left = FindMarked(MarkerEnv, execID)
		return len(left) == 0
	}) {
		t.Fatalf("processes of shell %s left: %v", execID, left)
	}
}

// execOK runs command in session id and returns its stdout, failing the test unless it exits 0.
func execOK(t *testing.T, m *Manager, id string, req Request) (stdout string, pid int) {
	t.Helper()
	rec := newRecorder()
	res, err := m.Exec(context.Background(), id, req, rec)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(%q) = %v, %v; stderr %q", req.Command, res, err, rec.stderr)
	}
	return string(rec.stdout), <-rec.started
}

func TestWarmShellReused(t *testing.T) {
	m := newManager(t)
	if _, err := m.Create(CreateOptions{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{DefaultID, "w"} {
		for i := range 3 {
			sh := waitWarm(t, m, id)
			warm, cold := m.stats.warm.Load(), m.stats.cold.Load()
			out, pid := execOK(t, m, id, Request{Command: `echo $$ $((SECONDS < 2))`})
			if pid != sh.pid || out != fmt.Sprintf("%d 1\n", sh.pid) {
				t.Fatalf("%s #%d: ran in pid %d (%q); the warm shell was %d", id, i, pid, out, sh.pid)
			}
			if m.stats.warm.Load() != warm+1 || m.stats.cold.Load() != cold {
				t.Fatalf("%s #%d: warm %d→%d, cold %d→%d; want one warm use", id, i, warm, m.stats.warm.Load(), cold, m.stats.cold.Load())
			}
			if sh.alive() {
				t.Fatalf("%s #%d: the used shell still runs", id, i)
			}
		}
	}
}

func TestWarmShellStateAndPerCommandSettings(t *testing.T) {
	m := newManager(t)
	base := m.Workdir()
	sub := filepath.Join(base, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		req  Request
		want string
	}{
		{Request{Command: "export P1='a b'; cd sub"}, ""},
		{Request{Command: `echo "$P1"; pwd`}, "a b\n" + sub + "\n"},
		// Per-command env and cwd apply to one command only (OLDPWD is the one the first
		// command's cd left)...
		{Request{Command: `echo "$K|$Q"; pwd; echo "${OLDPWD-unset}"`, Cwd: "/", Env: map[string]string{"K": "it's $x `y`\n", "Q": ""}},
			"it's $x `y`\n|\n/\n" + base + "\n"},
		{Request{Command: `echo "${K-unset}"; pwd`}, "unset\n" + sub + "\n"},
		// ...unless the command changes them itself.
		{Request{Command: "export K=mine; cd /", Cwd: base, Env: map[string]string{"K": "cmd"}}, ""},
		{Request{Command: `echo "$K"; pwd`}, "mine\n/\n"},
		{Request{Command: "unset P1 K; cd " + base}, ""},
		{Request{Command: `echo "${P1-unset} ${K-unset}"; pwd`}, "unset unset\n" + base + "\n"},
		// A marker in the per-command env never replaces the shell's own.
		{Request{Command: "echo ${#" + MarkerEnv + "}", Env: map[string]string{MarkerEnv: "x"}}, "24\n"},
	}
	for i, st := range steps {
		waitWarm(t, m, DefaultID)
		warm := m.stats.warm.Load()
		if out, _ := execOK(t, m, "", st.req); out != st.want {
			t.Fatalf("step %d (%q): stdout %q; want %q", i, st.req.Command, out, st.want)
		}
		if m.stats.warm.Load() != warm+1 {
			t.Fatalf("step %d: not run by the warm shell", i)
		}
	}
}

func TestWarmShellNotUsedForSpecialEnv(t *testing.T) {
	m := newManager(t)
	for _, env := range []map[string]string{{"A.B": "1"}, {"IFS": ":"}, {"LC_ALL": "C"}, {"BASH_ENV": "/dev/null"}} {
		waitWarm(t, m, DefaultID)
		cold, discarded := m.stats.cold.Load(), m.stats.discarded.Load()
		var k string
		for k = range env {
		}
		out, _ := execOK(t, m, "", Request{Command: "env | grep -c '^" + regexpQuote(k) + "='", Env: env})
		if out != "1\n" {
			t.Fatalf("env %v: %q", env, out)
		}
		if m.stats.cold.Load() != cold+1 || m.stats.discarded.Load() != discarded+1 {
			t.Fatalf("env %v: want a discarded warm shell and a fresh one", env)
		}
	}
}

func regexpQuote(s string) string { return strings.ReplaceAll(s, ".", `\.`) }

func TestWarmShellDiscardedWhenStateChanged(t *testing.T) {
	m := newManager(t)
	s := sessionOf(t, m, DefaultID)
	execOK(t, m, "", Request{Command: "true"})

	// The session state changed behind the warm shell's back.
	sh := waitWarm(t, m, DefaultID)
	s.mu.Lock()
	env := make(map[string]string, len(s.env)+1)
	for k, v := range s.env {
		env[k] = v
	}
	env["OUTSIDE"] = "1"
	s.env = env
	s.mu.Unlock()
	discarded := m.stats.discarded.Load()
	out, pid := execOK(t, m, "", Request{Command: "echo $OUTSIDE"})
	if out != "1\n" || pid == sh.pid || m.stats.discarded.Load() != discarded+1 {
		t.Fatalf("stdout %q, pid %d (warm %d), discarded %d→%d", out, pid, sh.pid, discarded, m.stats.discarded.Load())
	}
	waitGone(t, sh.execID)

	// The session's directory was removed and made again: the warm shell sits in the old one.
	dir := filepath.Join(m.Workdir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	execOK(t, m, "", Request{Command: "cd d"})
	sh = waitWarm(t, m, DefaultID)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, pid = execOK(t, m, "", Request{Command: "cat f; pwd"})
	if out != "new\n"+dir+"\n" || pid == sh.pid {
		t.Fatalf("after re-creating the cwd: %q in pid %d (warm %d)", out, pid, sh.pid)
	}
	waitGone(t, sh.execID)

	// A warm shell that died while idle is replaced too.
	sh = waitWarm(t, m, DefaultID)
	if err := sh.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-sh.exited
	if out, _ := execOK(t, m, "", Request{Command: "echo alive"}); out != "alive\n" {
		t.Fatalf("after the warm shell died: %q", out)
	}
}

func TestWarmShellKilledOnDeleteAndClose(t *testing.T) {
	m := newManager(t)
	if _, err := m.Create(CreateOptions{ID: "d"}); err != nil {
		t.Fatal(err)
	}
	sh := waitWarm(t, m, "d")
	if len(FindMarked(MarkerEnv, sh.execID)) != 1 {
		t.Fatalf("warm shell %d not found by its marker", sh.pid)
	}
	if err := m.Delete("d"); err != nil {
		t.Fatal(err)
	}
	if pids := FindMarked(MarkerEnv, sh.execID); len(pids) != 0 {
		t.Fatalf("warm shell left after Delete: %v", pids)
	}
	if sh.alive() {
		t.Fatal("warm shell not reaped after Delete")
	}

	// Delete while the next shell is being started: it is discarded once it is up.
	execOK(t, m, "e", Request{Command: "true"})
	s := sessionOf(t, m, "e")
	if err := m.Delete("e"); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, s)
	s.mu.Lock()
	left := s.warm
	s.mu.Unlock()
	if left != nil {
		t.Fatal("a deleted session kept a warm shell")
	}

	def := waitWarm(t, m, DefaultID)
	m.Close()
	if pids := FindMarked(MarkerEnv, def.execID); len(pids) != 0 {
		t.Fatalf("warm shell left after Close: %v", pids)
	}
	// Still usable, without warm shells.
	if out, _ := execOK(t, m, "", Request{Command: "echo after"}); out != "after\n" {
		t.Fatalf("after Close: %q", out)
	}
	waitIdle(t, m.def)
	if m.def.warm != nil {
		t.Fatal("a warm shell was started after Close")
	}
}

func TestWarmShellStdin(t *testing.T) {
	m := newManager(t)
	tests := []struct {
		name  string
		stdin []byte
		cmd   string
		want  string
	}{
		{"none is /dev/null", nil, "readlink /proc/self/fd/0; cat; echo rc=$?", "/dev/null\nrc=0\n"},
		{"given", []byte("50\n"), "read x; echo got $x; [ -p /dev/stdin ] && echo pipe", "got 50\npipe\n"},
		{"empty", []byte{}, "cat; echo rc=$?", "rc=0\n"},
		{"binary", []byte{0, 1, 2, 255}, "od -An -tu1 | tr -s ' '", " 0 1 2 255\n"},
		{"large unread", []byte(strings.Repeat("y", 1<<20)), "true", ""},
		{"large read", []byte(strings.Repeat("y", 1<<20)), "wc -c", "1048576\n"},
		{"payload and stdin pipes closed", []byte("x"), "for f in 3 4; do [ -e /proc/$$/fd/$f ] && echo $f open; done; echo ok", "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waitWarm(t, m, DefaultID)
			warm := m.stats.warm.Load()
			done := make(chan string, 1)
			go func() {
				out, _ := execOK(t, m, "", Request{Command: tt.cmd, Stdin: tt.stdin, Timeout: 20 * time.Second})
				done <- out
			}()
			select {
			case out := <-done:
				if strings.TrimLeft(out, " ") != strings.TrimLeft(tt.want, " ") {
					t.Fatalf("stdout %q; want %q", out, tt.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Exec hung")
			}
			if m.stats.warm.Load() != warm+1 {
				t.Fatal("not run by the warm shell")
			}
		})
	}
}

func TestWarmShellTimeoutKillsTree(t *testing.T) {
	m := newManager(t)
	sh := waitWarm(t, m, DefaultID)
	mark := newExecID()
	rec := newRecorder()
	start := time.Now()
	_, err := m.Exec(context.Background(), "", Request{
		Command: "echo partial; sleep 300 & setsid sleep 300 & (trap '' TERM HUP; setsid -f sleep 300 >/dev/null 2>&1); wait",
		Env:     map[string]string{"TESTMARK": mark}, Timeout: 500 * time.Millisecond,
	}, rec)
	if !errdefs.IsCode(err, errdefs.CodeCommandTimeout) {
		t.Fatalf("Exec = %v; want COMMAND_TIMEOUT", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	if pid := <-rec.started; pid != sh.pid || string(rec.stdout) != "partial\n" {
		t.Fatalf("pid %d (warm %d), stdout %q", pid, sh.pid, rec.stdout)
	}
	if pids := FindMarked("TESTMARK", mark); len(pids) != 0 {
		t.Fatalf("left: %v", pids)
	}
	if pids := FindMarked(MarkerEnv, sh.execID); len(pids) != 0 {
		t.Fatalf("left with the shell's marker: %v", pids)
	}
	if out, _ := execOK(t, m, "", Request{Command: "echo ok"}); out != "ok\n" {
		t.Fatalf("after timeout: %q", out)
	}
}

func TestWarmShellMessagesAndExitCodes(t *testing.T) {
	m := newManager(t)
	for _, tt := range []struct {
		cmd    string
		code   int
		stderr string
	}{
		{"nosuchcmd", 127, "hutch: line 17: nosuchcmd: command not found\n"},
		{"exit 42", 42, ""},
		{"kill -9 $$", 137, ""},
		{"return 3", 2, "hutch: line 17: return: can only `return' from a function or sourced script\n"},
	} {
		waitWarm(t, m, DefaultID)
		rec := newRecorder()
		res, err := m.Exec(context.Background(), "", Request{Command: tt.cmd}, rec)
		if err != nil || res.ExitCode != tt.code || string(rec.stderr) != tt.stderr {
			t.Errorf("%q = %v, %v, stderr %q; want %d, %q", tt.cmd, res.ExitCode, err, rec.stderr, tt.code, tt.stderr)
		}
	}
}

func TestWarmShellsCapped(t *testing.T) {
	m := newManager(t)
	const n = maxWarm + 4
	for i := range n {
		execOK(t, m, "s"+strconv.Itoa(i), Request{Command: "true"})
		waitIdle(t, sessionOf(t, m, "s"+strconv.Itoa(i)))
	}
	m.mu.Lock()
	ss := slices.Collect(maps.Values(m.sessions))
	m.mu.Unlock()
	warm := map[string]bool{}
	for _, s := range append(ss, m.def) {
		s.mu.Lock()
		if s.warm != nil {
			warm[s.id] = true
		}
		s.mu.Unlock()
	}
	if len(warm) != maxWarm {
		t.Fatalf("%d warm shells; want %d", len(warm), maxWarm)
	}
	for i := n - maxWarm; i < n; i++ {
		if !warm["s"+strconv.Itoa(i)] {
			t.Fatalf("recently used session s%d has no warm shell (warm: %v)", i, warm)
		}
	}
}

func TestShellExitsWithoutPayload(t *testing.T) {
	dir := t.TempDir()
	sh, err := spawnShell(map[string]string{"PATH": os.Getenv("PATH")}, dir, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	sh.script.Close() // what the shell sees when the agent dies
	select {
	case <-sh.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("shell did not exit on EOF")
	}
	sh.closeFDs()
	if code := exitCode(sh.cmd.ProcessState, sh.waitErr); code != 125 {
		t.Fatalf("exit code %d; want 125", code)
	}
	if _, ok, err := readState(sh.statePath); ok || err != nil {
		t.Fatalf("state saved without a command (%v)", err)
	}
	sh.discard()
	if _, err := os.Stat(sh.statePath); err == nil {
		t.Fatal("state file left after discard")
	}
}
