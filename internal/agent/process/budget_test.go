package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/testutil"
)

func TestMemoryLimit(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		limit  int64
		ok     bool
		budget int64
	}{
		{"v2 limit", map[string]string{"memory.max": "268435456\n"}, 256 << 20, true, 64 << 20},
		{"v2 max", map[string]string{"memory.max": "max\n"}, 0, false, 0},
		{"v1 limit", map[string]string{"memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30, true, 256 << 20},
		{"v1 unlimited", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false, 0},
		{"none", nil, 0, false, 0},
		{"garbage", map[string]string{"memory.max": "lots\n"}, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, v := range tt.files {
				path := filepath.Join(root, name)
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			limit, ok := MemoryLimit(root)
			if limit != tt.limit || ok != tt.ok || DefaultLogBudget(root) != tt.budget {
				t.Fatalf("MemoryLimit = %d %v, budget %d; want %d %v, %d", limit, ok, DefaultLogBudget(root), tt.limit, tt.ok, tt.budget)
			}
		})
	}
}

// TestLogBudgetFit: a log buffer larger than the budget allows is refused when asked for and
// lowered when it is the default; the record reports the size.
func TestLogBudgetFit(t *testing.T) {
	m := newTestManager(t, Config{LogBytes: 4 << 20, LogBudget: 4 << 20})
	info := mustStart(t, m, StartRequest{Command: "true"})
	if info.LogBufferBytes != 2<<20 {
		t.Fatalf("default buffer = %d; want 2 MiB (half the budget)", info.LogBufferBytes)
	}
	_, err := m.Start(StartRequest{Command: "true", LogBytes: 4 << 20})
	var e *errdefs.Error
	if !errors.As(err, &e) || e.Code != errdefs.CodeInvalidArgument || e.Context["budgetBytes"] != int64(4<<20) ||
		e.Context["logBufferBytes"] != 4<<20 || e.Context["availableBytes"] == nil {
		t.Fatalf("Start(4 MiB) = %#v; want VALIDATION_FAILED with budget context", err)
	}
	if info := mustStart(t, m, StartRequest{Command: "true", LogBytes: MinLogBytes}); info.LogBufferBytes != MinLogBytes {
		t.Fatalf("record = %+v", info)
	}
	// No budget at all: the default is kept.
	m2 := newTestManager(t, Config{LogBytes: 4 << 20, LogBudget: -1})
	if info := mustStart(t, m2, StartRequest{Command: "true"}); info.LogBufferBytes != 4<<20 {
		t.Fatalf("without budget: %+v", info)
	}
}

// TestLogBudgetBoundsMemory: two processes that print more than the budget together hold at
// most the budget, each log stays an exact suffix of its output, and the memory comes back
// once they are saved.
func TestLogBudgetBoundsMemory(t *testing.T) {
	const budget = 4 << 20
	m := newTestManager(t, Config{Dir: t.TempDir(), LogBudget: budget})
	const lines = 1_000_000 // seq 1 1000000 prints 6.9 MB
	var want bytes.Buffer
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	var ids []string
	for range 2 {
		info := mustStart(t, m, StartRequest{Command: fmt.Sprintf("seq 1 %d", lines), LogBytes: 2 << 20})
		ids = append(ids, info.ID)
	}
	for _, id := range ids {
		waitExit(t, m, id)
	}
	for _, id := range ids {
		l, err := m.Logs(id)
		if err != nil {
			t.Fatal(err)
		}
		if l.StdoutEnd != int64(want.Len()) || len(l.Stdout) == 0 || len(l.Stdout) > 2<<20 ||
			!bytes.Equal(l.Stdout, want.Bytes()[l.StdoutOffset:]) {
			t.Fatalf("%s: held %d bytes %d-%d, not the tail of the output", id, len(l.Stdout), l.StdoutOffset, l.StdoutEnd)
		}
	}
	if got := m.budget.available(); got != budget {
		t.Fatalf("budget available after both were saved = %d; want %d", got, budget)
	}
}

// TestLogBudgetUsedUp: a start finds no budget left while others hold it (a clear error), and
// can start once one of them ended and was saved.
func TestLogBudgetUsedUp(t *testing.T) {
	m := newTestManager(t, Config{Dir: t.TempDir(), LogBudget: 4 * MinLogBytes, LogBytes: MinLogBytes})
	a := mustStart(t, m, StartRequest{Command: "sleep 300"})
	mustStart(t, m, StartRequest{Command: "sleep 300"})
	_, err := m.Start(StartRequest{Command: "true"})
	var e *errdefs.Error
	if !errors.As(err, &e) || e.Code != errdefs.CodeInvalidArgument || e.Context["availableBytes"] != int64(0) {
		t.Fatalf("third start = %#v; want VALIDATION_FAILED, nothing available", err)
	}
	if _, _, err := m.Kill(a.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	mustStart(t, m, StartRequest{Command: "true"})
}

// TestRingStopsGrowingAtBudget: a ring that cannot take more from its budget keeps what it
// has as its size and holds an exact suffix.
func TestRingStopsGrowingAtBudget(t *testing.T) {
	b := newBudget(3000)
	if !b.take(1000) {
		t.Fatal("take")
	}
	r := newChargedRing(10000, b, 1000)
	var all []byte
	for i := range 100 {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 97)
		r.write(p)
		all = append(all, p...)
		if cap(r.buf) > int(r.charged) || b.available() < 0 {
			t.Fatalf("cap %d charged %d available %d", cap(r.buf), r.charged, b.available())
		}
		held, err := r.held()
		if err != nil || !bytes.Equal(held, all[r.start:]) || r.end != int64(len(all)) {
			t.Fatalf("after %d bytes: held %d from %d, want the suffix", len(all), len(held), r.start)
		}
	}
	if r.size != 3000 || r.end-r.start != 3000 {
		t.Fatalf("size %d, holding %d; want 3000", r.size, r.end-r.start)
	}
	r.free()
	if b.available() != 3000 {
		t.Fatalf("available after free = %d", b.available())
	}
}

// TestLoadBoundsLogs: the log files found at start are not trusted: a file larger than the
// buffer gives its last bytes only, a symlink or FIFO gives an empty log (with a warning), and
// a symlinked record is skipped.
func TestLoadBoundsLogs(t *testing.T) {
	dir := t.TempDir()
	m := newTestManager(t, Config{Dir: dir, LogBytes: MinLogBytes})
	for _, id := range []string{"big", "link", "fifo"} {
		info := mustStart(t, m, StartRequest{Command: "echo out; echo err >&2", ID: id})
		waitExit(t, m, info.ID)
	}
	m.Shutdown(0)
	// big.stdout: 64 MiB (sparse), ending in TAIL.
	f, err := os.OpenFile(filepath.Join(dir, "big.stdout"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("TAIL\n"), 64<<20-5); err != nil {
		t.Fatal(err)
	}
	f.Close()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("not a log\n"), 0o600)
	os.Remove(filepath.Join(dir, "link.stdout"))
	if err := os.Symlink(secret, filepath.Join(dir, "link.stdout")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "fifo.stdout"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.stdout"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec, _ := os.ReadFile(filepath.Join(dir, "big.json"))
	other := filepath.Join(t.TempDir(), "other.json")
	os.WriteFile(other, bytes.ReplaceAll(rec, []byte(`"big"`), []byte(`"sym"`)), 0o600)
	if err := os.Symlink(other, filepath.Join(dir, "sym.json")); err != nil {
		t.Fatal(err)
	}

	m2 := newTestManager(t, Config{Dir: dir})
	l, err := m2.Logs("big")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Stdout) != MinLogBytes || !strings.HasSuffix(string(l.Stdout), "TAIL\n") || l.StdoutEnd != MinLogBytes ||
		l.StdoutOffset != 0 || string(l.Stderr) != "err\n" {
		t.Fatalf("big: %d bytes %d-%d, stderr %q", len(l.Stdout), l.StdoutOffset, l.StdoutEnd, l.Stderr)
	}
	out, _, _, _ := follow(t, m2, "big", l.StdoutOffset, 0, nil)
	if !bytes.Equal(out, l.Stdout) {
		t.Fatalf("big streamed %d bytes; want the held %d", len(out), len(l.Stdout))
	}
	for _, id := range []string{"link", "fifo"} {
		l, err := m2.Logs(id)
		if err != nil || len(l.Stdout) != 0 || string(l.Stderr) != "err\n" {
			t.Fatalf("%s: %q %q %v; want an empty stdout", id, l.Stdout, l.Stderr, err)
		}
	}
	if _, err := m2.Get("sym"); !errdefs.IsCode(err, errdefs.CodeProcessNotFound) {
		t.Fatalf("symlinked record loaded: %v", err)
	}
}

// buildShim builds hutch-init, whose `shim` subcommand starts every shell in a sandbox.
func buildShim(t *testing.T) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hutch-init")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/hutchdev/hutch/cmd/hutch-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("cannot build hutch-init: %v\n%s", err, out)
	}
	return []string{bin, "shim", "--fds", "2", "--"}
}

func shimManager(t *testing.T, shim []string) *Manager {
	t.Helper()
	sm, err := session.NewManager(session.Config{Workdir: t.TempDir(), StateDir: t.TempDir(), Env: os.Environ(),
		Shim: shim, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sm.Close)
	return newTestManager(t, Config{Sessions: sm})
}

// TestShimStartFailureIsError: the shim could not start bash (as when fork fails under pid
// pressure): status error with the reason, not "failed" with exit 125.
func TestShimStartFailureIsError(t *testing.T) {
	m := shimManager(t, append(buildShim(t), "/nonexistent/bash"))
	info, err := m.Start(StartRequest{Command: "true"})
	if err != nil || info.Status != StatusError || info.ExitCode != nil || !strings.Contains(info.Error, "no such file") {
		t.Fatalf("Start = %+v %v; want status error naming the cause", info, err)
	}
}

// TestKillIgnoringTERM: a process whose command ignores SIGTERM (below a bash that dies of
// it) stays running through the grace, then is killed: 137. One that exits on it: 143.
func TestKillIgnoringTERM(t *testing.T) {
	m := shimManager(t, buildShim(t))
	for _, tt := range []struct {
		cmd  string
		code int
	}{
		{`sh -c 'trap "" TERM; sleep 300; :'`, 137},
		{`trap "" TERM; sleep 300`, 137},
		{"sleep 300", 143},
	} {
		info := mustStart(t, m, StartRequest{Command: tt.cmd})
		testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool { return hasSleep(info.PID) })
		done := make(chan Info, 1)
		go func() {
			_, info, _ := m.Kill(info.ID, time.Second)
			done <- info
		}()
		// During the grace the record stays running.
		time.Sleep(300 * time.Millisecond)
		if got, _ := m.Get(info.ID); tt.code == 137 && got.Status != StatusRunning {
			t.Fatalf("%q during the grace: %+v; want running", tt.cmd, got)
		}
		end := <-done
		if end.Status != StatusKilled || end.ExitCode == nil || *end.ExitCode != tt.code {
			t.Fatalf("%q killed: %+v; want killed %d", tt.cmd, end, tt.code)
		}
	}
}

// hasSleep reports whether a sleep runs below pid.
func hasSleep(pid int) bool {
	out, _ := exec.Command("pgrep", "-P", fmt.Sprint(pid)).Output()
	for _, c := range strings.Fields(string(out)) {
		if comm, _ := os.ReadFile("/proc/" + c + "/comm"); strings.TrimSpace(string(comm)) == "sleep" || hasSleep(atoi(c)) {
			return true
		}
	}
	return false
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// TestExitedEarlyNamesCode: PROCESS_EXITED_BEFORE_READY names the exit code (acceptance P5).
func TestExitedEarlyNamesCode(t *testing.T) {
	m := newTestManager(t, Config{})
	mustStart(t, m, StartRequest{Command: "exit 9", ID: "web"})
	waitExit(t, m, "web")
	_, err := m.WaitLog(context.Background(), "web", LogWait{Text: "ready"})
	var e *errdefs.Error
	if !errors.As(err, &e) || e.Code != errdefs.CodeProcessExitedEarly || e.Message != "process web exited with code 9 before it was ready" ||
		e.Context["exitCode"] != 9 {
		t.Fatalf("WaitLog = %#v", err)
	}
	_, err = m.WaitPort(context.Background(), "web", PortWait{Port: 1, Mode: "tcp"})
	if !errors.As(err, &e) || e.Message != "process web exited with code 9 before it was ready" {
		t.Fatalf("WaitPort = %v", err)
	}
}
