package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/testutil"
)

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newTestManager returns a Manager on a fresh session manager; dir may be empty.
func newTestManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	if cfg.Sessions == nil {
		sm, err := session.NewManager(session.Config{Workdir: t.TempDir(), StateDir: t.TempDir(), Env: os.Environ(), Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sm.Close)
		cfg.Sessions = sm
	}
	cfg.Logger = quietLog()
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(0) })
	return m
}

func mustStart(t *testing.T, m *Manager, req StartRequest) Info {
	t.Helper()
	info, err := m.Start(req)
	if err != nil {
		t.Fatalf("Start(%q): %v", req.Command, err)
	}
	return info
}

func waitExit(t *testing.T, m *Manager, id string) Info {
	t.Helper()
	info, err := m.WaitExit(context.Background(), id, 30*time.Second)
	if err != nil {
		t.Fatalf("WaitExit(%s): %v", id, err)
	}
	return info
}

func TestStartStatusAndTable(t *testing.T) {
	m := newTestManager(t, Config{})
	for _, tt := range []struct {
		cmd    string
		code   int
		status Status
	}{
		{"echo hi", 0, StatusCompleted},
		{"exit 3", 3, StatusFailed},
		{"kill -TERM $$", 143, StatusKilled},
		{"kill -KILL $$", 137, StatusKilled},
	} {
		info := mustStart(t, m, StartRequest{Command: tt.cmd})
		if !strings.HasPrefix(info.ID, "proc_") || info.PID <= 0 || info.SessionID != "default" || info.Cwd == "" {
			t.Fatalf("started %+v", info)
		}
		end := waitExit(t, m, info.ID)
		if end.Status != tt.status || end.ExitCode == nil || *end.ExitCode != tt.code || end.EndTime == nil {
			t.Fatalf("%q ended %+v; want %s %d", tt.cmd, end, tt.status, tt.code)
		}
	}
	if got := m.List(""); len(got) != 4 || got[0].Command != "echo hi" || got[3].Command != "kill -KILL $$" {
		t.Fatalf("List = %+v", got)
	}
	mustStart(t, m, StartRequest{Command: "sleep 300", ID: "srv"})
	if got := m.List(StatusRunning); len(got) != 1 || got[0].ID != "srv" {
		t.Fatalf("List(running) = %+v", got)
	}
	if _, err := m.Start(StartRequest{Command: "true", ID: "srv"}); !errdefs.IsCode(err, errdefs.CodeProcessExists) {
		t.Fatalf("duplicate = %v", err)
	}
	for _, id := range []string{"kill-all", "list", "a/b", ".", "..", ".hidden", "-x", strings.Repeat("x", 129)} {
		if _, err := m.Start(StartRequest{Command: "true", ID: id}); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
			t.Errorf("id %q = %v; want VALIDATION_FAILED", id, err)
		}
	}
	if _, err := m.Start(StartRequest{Command: "true", LogBytes: 1000}); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Errorf("small log buffer = %v", err)
	}
	if _, err := m.Get("nope"); !errdefs.IsCode(err, errdefs.CodeProcessNotFound) {
		t.Errorf("Get(nope) = %v", err)
	}
	if n := m.KillAll(time.Second); n != 1 {
		t.Fatalf("KillAll = %d; want 1", n)
	}
	if info, _ := m.Get("srv"); info.Status != StatusKilled {
		t.Fatalf("after KillAll: %+v", info)
	}
	killed, _, err := m.Kill("srv", 0)
	if err != nil || killed {
		t.Fatalf("Kill of an ended process = %v %v", killed, err)
	}
}

// TestStartError: a shell that cannot be started gives a record with status error.
func TestStartError(t *testing.T) {
	sm, err := session.NewManager(session.Config{Workdir: t.TempDir(), StateDir: t.TempDir(), Logger: quietLog(),
		Shim: []string{"/nonexistent/shim"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	m := newTestManager(t, Config{Sessions: sm})
	info, err := m.Start(StartRequest{Command: "true"})
	if err != nil || info.Status != StatusError || info.Error == "" || info.PID != 0 {
		t.Fatalf("Start = %+v %v; want status error", info, err)
	}
}

// follow reads every event of id from the given offsets until the exit, or until stop
// returns true for an output event.
func follow(t *testing.T, m *Manager, id string, so, se int64, stop func(Event) bool) (out, errOut []byte, lines []string, f *Follower) {
	t.Helper()
	f, err := m.Follow(id, so, se)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		ev, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case KindOutput:
			if ev.Stream == Stdout {
				out = append(out, ev.Data...)
			} else {
				errOut = append(errOut, ev.Data...)
			}
			lines = append(lines, ev.Stream.String()+":"+string(ev.Data))
			if stop != nil && stop(ev) {
				return
			}
		case KindDropped:
			t.Fatalf("unexpected drop %+v", ev)
		}
	}
}

// TestFollowOrderAndResume: output comes in arrival order across streams, and a reader that
// stops and resumes from its offsets gets exactly the rest.
func TestFollowOrderAndResume(t *testing.T) {
	m := newTestManager(t, Config{})
	info := mustStart(t, m, StartRequest{Command: `for i in $(seq 1 20); do echo "out $i"; sleep 0.01; echo "err $i" >&2; sleep 0.01; done`})
	_, _, lines, _ := follow(t, m, info.ID, 0, 0, nil)
	var want []string
	for i := 1; i <= 20; i++ {
		want = append(want, fmt.Sprintf("stdout:out %d\n", i), fmt.Sprintf("stderr:err %d\n", i))
	}
	if strings.Join(lines, "") != strings.Join(want, "") {
		t.Fatalf("events = %q\nwant %q", lines, want)
	}
	// Held output keeps the order too, read after the end.
	_, _, again, _ := follow(t, m, info.ID, 0, 0, nil)
	if strings.Join(again, "") != strings.Join(want, "") {
		t.Fatalf("replayed events = %q", again)
	}

	info = mustStart(t, m, StartRequest{Command: `for i in $(seq 1 3000); do echo "line $i"; echo "e$i" >&2; done`})
	n := 0
	out1, err1, _, f := follow(t, m, info.ID, 0, 0, func(Event) bool { n++; return n == 5 })
	so, se := f.Offsets()
	if so != int64(len(out1)) || se != int64(len(err1)) {
		t.Fatalf("offsets %d,%d after %d,%d bytes", so, se, len(out1), len(err1))
	}
	out2, err2, _, _ := follow(t, m, info.ID, so, se, nil)
	var wantOut, wantErr bytes.Buffer
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&wantOut, "line %d\n", i)
		fmt.Fprintf(&wantErr, "e%d\n", i)
	}
	if got := append(out1, out2...); !bytes.Equal(got, wantOut.Bytes()) {
		t.Fatalf("stdout resumed = %d bytes; want %d", len(got), wantOut.Len())
	}
	if got := append(err1, err2...); !bytes.Equal(got, wantErr.Bytes()) {
		t.Fatalf("stderr resumed = %d bytes; want %d", len(got), wantErr.Len())
	}
	if _, err := m.Follow(info.ID, int64(wantOut.Len())+1, 0); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("offset past the end = %v", err)
	}
}

// TestBoundedLogs: 50 MiB of output through a 1 MiB buffer.
func TestBoundedLogs(t *testing.T) {
	m := newTestManager(t, Config{LogBytes: 1 << 20})
	const total = 50 << 20
	info := mustStart(t, m, StartRequest{Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo tail >&2", total)})
	waitExit(t, m, info.ID)
	p, _ := m.lookup(info.ID)
	p.mu.Lock()
	r := p.logs[Stdout]
	if r.end != total || r.start != total-(1<<20) || cap(r.buf) > 1<<20 {
		t.Errorf("ring start %d end %d cap %d", r.start, r.end, cap(r.buf))
	}
	if len(p.order) > maxSegs {
		t.Errorf("%d order entries", len(p.order))
	}
	p.mu.Unlock()
	l, err := m.Logs(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Stdout) != 1<<20 || l.StdoutOffset != total-(1<<20) || l.StdoutEnd != total || string(l.Stderr) != "tail\n" {
		t.Fatalf("logs: %d bytes, %d-%d, stderr %q", len(l.Stdout), l.StdoutOffset, l.StdoutEnd, l.Stderr)
	}
	f, _ := m.Follow(info.ID, 0, 0)
	ev, err := f.Next(context.Background())
	if err != nil || ev.Kind != KindDropped || ev.Stream != Stdout || ev.From != 0 || ev.To != total-(1<<20) {
		t.Fatalf("first event = %+v %v; want a drop", ev, err)
	}
}

func TestPersistenceAndRetention(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "procs")
	m := newTestManager(t, Config{Dir: dir})
	info := mustStart(t, m, StartRequest{Command: "echo out; echo err >&2; exit 4", ID: "done"})
	waitExit(t, m, info.ID)
	mustStart(t, m, StartRequest{Command: "sleep 300", ID: "live"})
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v %v", fi, err)
	}
	// A second Manager on the same directory: as after an agent that died.
	m2 := newTestManager(t, Config{Dir: dir, Retention: time.Hour})
	got, err := m2.Get("done")
	if err != nil || got.Status != StatusFailed || *got.ExitCode != 4 {
		t.Fatalf("reloaded = %+v %v", got, err)
	}
	l, err := m2.Logs("done")
	if err != nil || string(l.Stdout) != "out\n" || string(l.Stderr) != "err\n" || l.StdoutEnd != 4 {
		t.Fatalf("reloaded logs = %+v %v", l, err)
	}
	out, errOut, _, _ := follow(t, m2, "done", 0, 0, nil)
	if string(out) != "out\n" || string(errOut) != "err\n" {
		t.Fatalf("reloaded stream %q %q", out, errOut)
	}
	live, _ := m2.Get("live")
	if live.Status != StatusError || live.Error != errAgentRestarted || live.EndTime == nil {
		t.Fatalf("record left running = %+v", live)
	}
	if _, err := m2.Start(StartRequest{Command: "true", ID: "done"}); !errdefs.IsCode(err, errdefs.CodeProcessExists) {
		t.Fatalf("reusing a retained id = %v", err)
	}
	// Shutdown kills and records the real exit.
	m.Shutdown(time.Second)
	if got, _ := m.Get("live"); got.Status != StatusKilled {
		t.Fatalf("after Shutdown: %+v", got)
	}
	if _, err := m.Start(StartRequest{Command: "true"}); !errdefs.IsCode(err, errdefs.CodeUnavailable) {
		t.Fatalf("Start after Shutdown = %v", err)
	}
	m3 := newTestManager(t, Config{Dir: dir, Retention: 100 * time.Millisecond})
	testutil.Poll(t, 20*time.Millisecond, 10*time.Second, func() bool { return len(m3.List("")) == 0 })
	if got := m3.List(""); len(got) != 0 {
		t.Fatalf("after retention: %+v", got)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("file left: %s", e.Name())
	}
	if _, err := os.Stat(filepath.Join(dir, "done.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("record file: %v", err)
	}
}
