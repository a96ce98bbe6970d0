package terminal

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/session"
)

func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	dir := t.TempDir()
	sm, err := session.NewManager(session.Config{Workdir: dir, StateDir: t.TempDir(), Env: os.Environ(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sm.Close)
	cfg.Sessions = sm
	cfg.Logger = slog.New(slog.DiscardHandler)
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 500 * time.Millisecond
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// readUntil reads v's output until it contains want after what earlier calls for v matched,
// and returns the output read up to the end of the match.
func readUntil(t *testing.T, v *Viewer, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pending := leftovers[v]
	buf := make([]byte, 4096)
	for !strings.Contains(pending, want) {
		n, err := v.Read(ctx, buf)
		pending += string(buf[:n])
		if err != nil {
			t.Fatalf("read: %v; want %q in %q", err, want, pending)
		}
	}
	i := strings.Index(pending, want) + len(want)
	leftovers[v] = pending[i:]
	return pending[:i]
}

// leftovers is what readUntil read past its match, per viewer.
var leftovers = map[*Viewer]string{}

func TestShellRunsAndExits(t *testing.T) {
	m := newManager(t, Config{})
	v, err := m.Attach("t1", Options{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if r := v.Ready(); r.ID != "t1" || r.Cols != 100 || r.Rows != 30 || r.PID <= 0 {
		t.Fatalf("ready = %+v", r)
	}
	v.Write([]byte("echo \"$TERM $LANG $HUTCH_TERMINAL\"; stty size\n"))
	readUntil(t, v, "xterm-256color C.UTF-8 t1")
	readUntil(t, v, "30 100")
	if err := v.Resize(0, 10); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("resize 0 cols = %v; want VALIDATION_FAILED", err)
	}
	if err := v.Resize(100000, 10); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("resize 100000 cols = %v; want VALIDATION_FAILED", err)
	}
	if err := v.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	v.Write([]byte("stty size; exit 3\n"))
	readUntil(t, v, "43 132")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		_, err := v.Read(ctx, make([]byte, 4096))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if code, ok := v.ExitCode(); !ok || code != 3 {
		t.Fatalf("exit = %d %v; want 3", code, ok)
	}
	in, err := m.Get("t1")
	if err != nil || !in.Exited || in.ExitCode == nil || *in.ExitCode != 3 {
		t.Fatalf("Get = %+v %v", in, err)
	}
	// Attaching to an exited terminal starts a fresh shell.
	v2, err := m.Attach("t1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if v2.Ready().PID == in.PID || v2.Ready().ReplayBytes != 0 && v2.Ready().Cols != DefaultCols {
		t.Fatalf("reattach after exit = %+v; want a new shell", v2.Ready())
	}
}

func TestReplayAndViewers(t *testing.T) {
	m := newManager(t, Config{})
	a, err := m.Attach("rp", Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Attach("rp", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.Write([]byte("echo one-$((40+2))\n"))
	readUntil(t, a, "one-42")
	readUntil(t, b, "one-42")
	a.Close()
	b.Write([]byte("echo two-$((40+3))\n"))
	readUntil(t, b, "two-43")
	in, _ := m.Get("rp")
	if in.Viewers != 1 {
		t.Fatalf("viewers = %d; want 1", in.Viewers)
	}
	c, err := m.Attach("rp", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Ready().ReplayBytes == 0 {
		t.Fatal("no replay")
	}
	buf := make([]byte, c.Ready().ReplayBytes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := io.ReadFull(readerOf(ctx, c), buf); err != nil {
		t.Fatal(err)
	}
	if s := string(buf); strings.Count(s, "one-42") != 1 || strings.Count(s, "two-43") != 1 {
		t.Fatalf("replay = %q; want one-42 and two-43 once each", s)
	}
}

type viewerReader struct {
	ctx context.Context
	v   *Viewer
}

func (r viewerReader) Read(p []byte) (int, error) { return r.v.Read(r.ctx, p) }

func readerOf(ctx context.Context, v *Viewer) io.Reader { return viewerReader{ctx, v} }

func TestKillTree(t *testing.T) {
	m := newManager(t, Config{})
	v, err := m.Attach("k", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	// A job that ignores SIGHUP, and one that left the session.
	v.Write([]byte("trap '' HUP; (trap '' HUP; exec sleep 300) & echo job=$!\n"))
	readUntil(t, v, "\njob=")
	pid, err := strconv.Atoi(strings.TrimSpace(readUntil(t, v, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.List()) != 1 {
		t.Fatalf("list = %+v", m.List())
	}
	in, err := m.Kill(context.Background(), "k")
	if err != nil || !in.Exited || in.ExitCode == nil {
		t.Fatalf("Kill = %+v %v", in, err)
	}
	if unix.Kill(pid, 0) == nil {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z") {
			t.Fatalf("job %d still alive after kill", pid)
		}
	}
	if _, err := m.Kill(context.Background(), "k"); !errdefs.IsCode(err, errdefs.CodeTerminalNotFound) {
		t.Fatalf("second Kill = %v; want TERMINAL_NOT_FOUND", err)
	}
	if len(m.List()) != 0 {
		t.Fatalf("list after kill = %+v", m.List())
	}
}

func TestSlowViewerDropped(t *testing.T) {
	m := newManager(t, Config{BufferBytes: MinBufferBytes, SlowViewer: 300 * time.Millisecond})
	slow, err := m.Attach("s", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, err := m.Attach("s", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	fast.Write([]byte("head -c 2000000 /dev/zero | tr '\\0' x; echo; echo DONE-$((1+1))\n"))
	readUntil(t, fast, "DONE-2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = io.Copy(io.Discard, readerOf(ctx, slow))
	if !errors.Is(err, ErrTooSlow) {
		t.Fatalf("slow viewer: %v; want ErrTooSlow", err)
	}
}

func TestBadOptions(t *testing.T) {
	m := newManager(t, Config{MaxTerminals: 1})
	for _, tc := range []struct {
		id   string
		opts Options
		code errdefs.Code
	}{
		{"Bad", Options{}, errdefs.CodeInvalidArgument},
		{strings.Repeat("a", 65), Options{}, errdefs.CodeInvalidArgument},
		{"ok", Options{Cols: 0, Rows: 5}, errdefs.CodeInvalidArgument},
		{"ok", Options{Cols: 1001, Rows: 5}, errdefs.CodeInvalidArgument},
		{"ok", Options{Shell: "bash"}, errdefs.CodeInvalidCommand},
		{"ok", Options{Shell: "/nonexistent/sh"}, errdefs.CodeInvalidCommand},
		{"ok", Options{Shell: "/etc/passwd"}, errdefs.CodeInvalidCommand},
		{"ok", Options{Session: "../x"}, errdefs.CodeInvalidArgument},
	} {
		if _, err := m.Attach(tc.id, tc.opts); !errdefs.IsCode(err, tc.code) {
			t.Errorf("Attach(%q, %+v) = %v; want %s", tc.id, tc.opts, err, tc.code)
		}
	}
	v, err := m.Attach("one", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := m.Attach("two", Options{}); !errdefs.IsCode(err, errdefs.CodeResourceBusy) {
		t.Fatalf("second terminal over the limit = %v; want RESOURCE_BUSY", err)
	}
}

func TestRing(t *testing.T) {
	r := newRing(10)
	var all []byte
	for i := range 7 {
		p := bytes.Repeat([]byte{byte('a' + i)}, i+1)
		r.write(p)
		all = append(all, p...)
		held := all[max(0, len(all)-10):]
		var got []byte
		for off := r.start(); off < r.end; {
			buf := make([]byte, 3)
			n := r.readAt(off, buf)
			got = append(got, buf[:n]...)
			off += int64(n)
		}
		if string(got) != string(held) || r.end != int64(len(all)) {
			t.Fatalf("after %d writes: held %q; want %q", i+1, got, held)
		}
	}
}

// A process that left the shell's session holds the pseudo-terminal open: the shell's exit is
// still reported (within the drain wait), and kill and Close do not hang (a tester's finding).
func TestExitWithSetsidHolder(t *testing.T) {
	m := newManager(t, Config{})
	v, err := m.Attach("holder", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	v.Write([]byte("setsid sleep 300 & disown; sleep 0.3; exit 4\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, err := v.Read(ctx, make([]byte, 4096))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("no exit while a setsid'd process holds the terminal: %v", err)
		}
	}
	if code, ok := v.ExitCode(); !ok || code != 4 {
		t.Fatalf("exit = %d %v; want 4", code, ok)
	}
	// The setsid'd process runs on (it left the session), until the test kills it.
	t.Cleanup(func() { _ = exec.Command("pkill", "-f", "^sleep 300$").Run() })
	start := time.Now()
	kctx, kcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer kcancel()
	if _, err := m.Kill(kctx, "holder"); err != nil {
		t.Fatal(err)
	}
	if kctx.Err() != nil {
		t.Fatalf("Kill hung for %v", time.Since(start))
	}
}

// Input a program does not read fails after inputWait, so the viewer that sent it is let go
// instead of holding the terminal's input (a tester's finding).
func TestUnreadInputTimesOut(t *testing.T) {
	old := inputWait
	inputWait = 300 * time.Millisecond
	t.Cleanup(func() { inputWait = old })
	m := newManager(t, Config{})
	v, err := m.Attach("stuck", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	v.Write([]byte("stty raw -echo; echo ready; sleep 60\n"))
	readUntil(t, v, "ready")
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	var werr error
	for range 8 {
		if _, werr = v.Write(chunk); werr != nil {
			break
		}
	}
	if !errdefs.IsCode(werr, errdefs.CodeResourceBusy) {
		t.Fatalf("writes to a program that reads nothing: %v; want RESOURCE_BUSY", werr)
	}
	// The terminal still works for others: a resize goes through.
	if err := v.Resize(90, 30); err != nil {
		t.Fatal(err)
	}
}

// The agent's own binary is not a shell.
func TestAgentBinaryRefusedAsShell(t *testing.T) {
	m := newManager(t, Config{})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Attach("self", Options{Shell: self}); !errdefs.IsCode(err, errdefs.CodeInvalidCommand) {
		t.Fatalf("Attach with the running binary as shell: %v; want INVALID_COMMAND", err)
	}
}
