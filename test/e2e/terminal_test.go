package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// termReader accumulates a terminal's output so that successive waits see it in order.
type termReader struct {
	t    *testing.T
	term *client.Terminal
	buf  []byte // read and not yet matched
}

// until reads until the output holds want after earlier matches; it returns everything up to
// the end of the match.
func (r *termReader) until(want string) []byte {
	r.t.Helper()
	chunk := make([]byte, 64<<10)
	// A hang bound, not a speed check. gVisor's pty is slow: 10 MiB through one took 25 s
	// with runsc alone on systrap and over 2 minutes through hutch on ptrace.
	bound := 2 * time.Minute
	if defaultRuntime == "gvisor" {
		bound = 8 * time.Minute
	}
	deadline := time.Now().Add(bound)
	from := 0 // r.buf[:from] holds no match
	for {
		if i := bytes.Index(r.buf[from:], []byte(want)); i >= 0 {
			from += i
			break
		}
		from = max(0, len(r.buf)-len(want)+1)
		if time.Now().After(deadline) {
			r.t.Fatalf("no %q in the terminal output; last bytes: %q", want, tail(r.buf))
		}
		n, err := r.term.Read(chunk)
		r.buf = append(r.buf, chunk[:n]...)
		if err != nil {
			r.t.Fatalf("read: %v; want %q; last bytes: %q", err, want, tail(r.buf))
		}
	}
	i := from + len(want)
	out := r.buf[:i:i]
	r.buf = r.buf[i:]
	return out
}

func tail(b []byte) []byte { return b[max(0, len(b)-300):] }

func (r *termReader) send(s string) {
	r.t.Helper()
	if _, err := r.term.Write([]byte(s)); err != nil {
		r.t.Fatal(err)
	}
}

// nextError waits for an error event.
func nextError(t *testing.T, term *client.Terminal) *errdefs.Error {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-term.Events():
			if !ok {
				t.Fatal("events closed; want an error event")
			}
			if ev.Type == "error" {
				return ev.Err
			}
		case <-timeout:
			t.Fatal("no error event")
		}
	}
}

func openTerminal(t *testing.T, sb *client.Sandbox, id string, opts client.TerminalOptions) (*client.Terminal, *termReader) {
	t.Helper()
	term, err := sb.Terminal(ctxT(t, time.Minute), id, opts)
	if err != nil {
		t.Fatalf("Terminal(%s) = %v\nhutchd log:\n%s", id, err, d.LogTail())
	}
	t.Cleanup(func() { term.Close() })
	<-term.Events() // ready
	return term, &termReader{t: t, term: term}
}

func TestTerminal(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-term", nil)
	ctx := ctxT(t, 10*time.Minute)
	term, r := openTerminal(t, sb, "t1", client.TerminalOptions{Cols: 80, Rows: 24})
	if rd := term.Ready(); rd.ID != "t1" || rd.Cols != 80 || rd.Rows != 24 || rd.PID <= 0 {
		t.Fatalf("ready = %+v", rd)
	}

	// Resize, seen by stty; the locale and TERM.
	if err := term.Resize(120, 40); err != nil {
		t.Fatal(err)
	}
	r.send("stty size; echo \"$TERM/$LANG\"\n")
	r.until("40 120")
	r.until("xterm-256color/C.UTF-8")

	// Bad input: error events, and the terminal stays usable.
	term.Resize(0, 10)
	if e := nextError(t, term); e.Code != errdefs.CodeInvalidArgument {
		t.Fatalf("resize 0 cols: %v; want VALIDATION_FAILED", e)
	}
	term.Resize(100000, 10)
	if e := nextError(t, term); e.Code != errdefs.CodeInvalidArgument {
		t.Fatalf("resize 100000 cols: %v; want VALIDATION_FAILED", e)
	}
	r.send("stty size\n")
	r.until("40 120")

	// Multibyte UTF-8 (printed from octal escapes, so the typed echo differs) arrives intact.
	r.send(`printf '\346\227\245\346\234\254\350\252\236 \360\237\216\211 \303\251\n'` + "\n")
	r.until("日本語 🎉 é")

	// 10 MiB of output arrives intact and in order: compare its hash with the sandbox's.
	const gen = "seq -f '%09.0f' 1 1048576" // 1048576 lines of 10 bytes
	res, err := sb.Exec(ctx, gen+" | sha256sum", nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("hash in the sandbox: %v %+v", err, res)
	}
	want := strings.Fields(string(res.Stdout))[0]
	r.send("echo S$((6*7)); " + gen + "; echo E$((6*7))\n")
	r.until("S42\r\n")
	big := r.until("E42")
	big = bytes.ReplaceAll(big[:len(big)-3], []byte("\r"), nil) // the pty turns \n into \r\n
	if sum := sha256.Sum256(big); hex.EncodeToString(sum[:]) != want || len(big) != 10<<20 {
		t.Fatalf("10 MiB output: %d bytes, sha256 %x; want %d bytes, %s", len(big), sum, 10<<20, want)
	}

	// Disconnect, produce output, reconnect: the missed output is replayed exactly once.
	r.send("(sleep 2; echo X$((5*5))) &\n")
	r.until("[1] ")
	term.Close()
	list, err := sb.ListTerminals(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "t1" || list[0].Exited {
		t.Fatalf("ListTerminals after the viewer left = %+v %v", list, err)
	}
	time.Sleep(3 * time.Second)
	term2, r2 := openTerminal(t, sb, "t1", client.TerminalOptions{})
	rd := term2.Ready()
	if rd.PID != term.Ready().PID || rd.ReplayBytes <= 0 || rd.ReplayBytes > 1<<20 {
		t.Fatalf("reattach ready = %+v; want the same shell and a replay of at most 1 MiB", rd)
	}
	replay := make([]byte, rd.ReplayBytes)
	if _, err := io.ReadFull(term2, replay); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(replay, []byte("X25")); n != 1 {
		t.Fatalf("replay holds X25 %d times; want 1 (tail %q)", n, tail(replay))
	}
	r2.send("echo after-$((2+2))\n")
	if live := r2.until("after-4"); bytes.Contains(live, []byte("X25")) {
		t.Fatalf("X25 came again after the replay: %q", live)
	}

	// Two viewers see the same output; exit sends the code to both.
	a, ra := openTerminal(t, sb, "t2", client.TerminalOptions{})
	b, rb := openTerminal(t, sb, "t2", client.TerminalOptions{})
	ra.send("echo two-$((3*3))\n")
	ra.until("two-9")
	rb.until("two-9")
	ra.send("exit 3\n")
	for _, v := range []*client.Terminal{a, b} {
		if _, err := io.Copy(io.Discard, v); err != nil {
			t.Fatalf("after exit: %v; want EOF", err)
		}
		if code, ok := v.ExitCode(); !ok || code != 3 {
			t.Fatalf("exit code %d %v; want 3", code, ok)
		}
	}
	list, _ = sb.ListTerminals(ctx)
	if len(list) != 2 || list[1].ID != "t2" || !list[1].Exited || list[1].ExitCode == nil || *list[1].ExitCode != 3 {
		t.Fatalf("list after exit = %+v", list)
	}

	// Kill: the viewer sees the exit, the terminal is gone.
	info, err := sb.KillTerminal(ctx, "t1")
	if err != nil || !info.Exited {
		t.Fatalf("KillTerminal = %+v %v", info, err)
	}
	if _, err := io.Copy(io.Discard, term2); err != nil {
		t.Fatalf("viewer after kill: %v; want EOF", err)
	}
	if _, err := sb.KillTerminal(ctx, "t1"); !errdefs.IsCode(err, errdefs.CodeTerminalNotFound) {
		t.Fatalf("KillTerminal again = %v; want TERMINAL_NOT_FOUND", err)
	}
	if _, err := d.Client().SandboxHandle("e2e-term-nosuch").Terminal(ctx, "x", client.TerminalOptions{}); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("terminal of an unknown sandbox = %v; want SANDBOX_NOT_FOUND", err)
	}
	if _, err := sb.Terminal(ctx, "Bad!", client.TerminalOptions{}); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("bad terminal id = %v; want VALIDATION_FAILED", err)
	}
	if _, err := sb.Terminal(ctx, "t3", client.TerminalOptions{Cols: 0, Rows: 5}); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("0 columns = %v; want VALIDATION_FAILED", err)
	}
}

// TestTerminalRawProtocol drives the WebSocket directly, as a browser does: the token as a
// subprotocol, a malformed control frame, and the refusals (token, origin, unknown sandbox).
func TestTerminalRawProtocol(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sandbox(t, "e2e-term-raw", nil)
	ctx := ctxT(t, 5*time.Minute)
	base := strings.Replace(d.URL(), "http://", "ws://", 1) + "/v1/sandboxes/"
	dial := func(path string, protos []string, h http.Header) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(ctx, base+path, &websocket.DialOptions{Subprotocols: protos, HTTPHeader: h})
	}
	for _, tc := range []struct {
		name   string
		path   string
		protos []string
		header http.Header
		status int
	}{
		{"wrong subprotocol token", "e2e-term-raw/terminals/r", []string{"hutch.v1", "bearer.wrong"}, nil, 401},
		{"wrong header token", "e2e-term-raw/terminals/r", []string{"hutch.v1"}, http.Header{"Authorization": {"Bearer wrong"}}, 401},
		{"no token", "e2e-term-raw/terminals/r", []string{"hutch.v1"}, nil, 401},
		{"cross-origin", "e2e-term-raw/terminals/r", []string{"hutch.v1", "bearer." + d.Token}, http.Header{"Origin": {"http://evil.example"}}, 403},
		{"unknown sandbox", "e2e-term-nosuch/terminals/r", []string{"hutch.v1", "bearer." + d.Token}, nil, 404},
		{"bad size", "e2e-term-raw/terminals/r?cols=100000", []string{"hutch.v1", "bearer." + d.Token}, nil, 400},
		{"missing shell", "e2e-term-raw/terminals/r?shell=/bin/nope", []string{"hutch.v1", "bearer." + d.Token}, nil, 400},
	} {
		_, resp, err := dial(tc.path, tc.protos, tc.header)
		if err == nil || resp == nil || resp.StatusCode != tc.status {
			t.Errorf("%s: %v %v; want HTTP %d", tc.name, resp, err, tc.status)
		}
	}
	c, resp, err := dial("e2e-term-raw/terminals/r?cols=100&rows=30", []string{"hutch.v1", "bearer." + d.Token}, http.Header{"Origin": {d.URL()}})
	if err != nil {
		t.Fatalf("dial: %v %v", resp, err)
	}
	defer c.CloseNow()
	if c.Subprotocol() != "hutch.v1" {
		t.Fatalf("subprotocol %q; want hutch.v1", c.Subprotocol())
	}
	next := func() (websocket.MessageType, map[string]any, []byte) {
		t.Helper()
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if typ == websocket.MessageText {
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("text frame %q: %v", b, err)
			}
		}
		return typ, m, b
	}
	if typ, m, _ := next(); typ != websocket.MessageText || m["type"] != "ready" || m["cols"] != float64(100) || m["rows"] != float64(30) {
		t.Fatalf("first frame %v %v; want ready 100x30", typ, m)
	}
	for _, bad := range []string{`{"type":"resize"`, `[1,2]`, `{"type":"resize","cols":0,"rows":10}`, `{"type":"resize","cols":100000,"rows":10}`, `{"type":"nope"}`} {
		c.Write(ctx, websocket.MessageText, []byte(bad))
		for {
			typ, m, _ := next()
			if typ == websocket.MessageText {
				if m["type"] != "error" || m["code"] == "" || m["message"] == "" {
					t.Fatalf("control %s: %v; want an error frame", bad, m)
				}
				break
			}
		}
	}
	c.Write(ctx, websocket.MessageBinary, []byte("echo raw-$((8*8)); exit 7\n"))
	var out bytes.Buffer
	var exit map[string]any
	for exit == nil {
		typ, m, b := next()
		if typ == websocket.MessageBinary {
			out.Write(b)
		} else if m["type"] == "exit" {
			exit = m
		}
	}
	if !strings.Contains(out.String(), "raw-64") || exit["code"] != float64(7) {
		t.Fatalf("output %q exit %v; want raw-64 and code 7", out.String(), exit)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after exit: %v; want close 1000", err)
	}
}
