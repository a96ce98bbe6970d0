package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/internal/agentapi"
)

// wsFrame is a server → viewer text frame.
type wsFrame struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Cols, Rows  int
	PID         int             `json:"pid"`
	ReplayBytes int64           `json:"replayBytes"`
	Code        json.RawMessage `json:"code"`
	Message     string          `json:"message"`
}

// dialTerminal connects to /api/terminals/{tid}?query and returns the connection and its ready frame.
func (a *testAgent) dialTerminal(ctx context.Context, tid, query string) (*websocket.Conn, wsFrame) {
	a.t.Helper()
	c, _, err := websocket.Dial(ctx, "ws://agent/api/terminals/"+tid+"?"+query, &websocket.DialOptions{HTTPClient: a.client, Subprotocols: []string{agentapi.TerminalSubprotocol}})
	if err != nil {
		a.t.Fatalf("dial terminal %s: %v", tid, err)
	}
	a.t.Cleanup(func() { c.CloseNow() })
	typ, b, err := c.Read(ctx)
	var f wsFrame
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &f) != nil || f.Type != "ready" {
		a.t.Fatalf("first frame %v %q %v; want ready", typ, b, err)
	}
	return c, f
}

// readOutput reads frames until the binary output holds want; text frames are returned too.
func readOutput(t *testing.T, ctx context.Context, c *websocket.Conn, want string) (string, []wsFrame) {
	t.Helper()
	var out strings.Builder
	var frames []wsFrame
	for want == "" || !strings.Contains(out.String(), want) {
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v; want %q in %q (frames %+v)", err, want, out.String(), frames)
		}
		if typ == websocket.MessageBinary {
			out.Write(b)
			continue
		}
		var f wsFrame
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("text frame %q: %v", b, err)
		}
		frames = append(frames, f)
		if want == "" {
			return out.String(), frames
		}
	}
	return out.String(), frames
}

func TestTerminalWebSocket(t *testing.T) {
	a := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, ready := a.dialTerminal(ctx, "ws1", "cols=90&rows=20")
	if ready.ID != "ws1" || ready.Cols != 90 || ready.Rows != 20 || ready.PID <= 0 || ready.ReplayBytes != 0 {
		t.Fatalf("ready = %+v", ready)
	}
	c.Write(ctx, websocket.MessageBinary, []byte("stty size\n"))
	readOutput(t, ctx, c, "20 90")
	// Bad control frames: an error frame each, and the terminal stays usable.
	for _, bad := range []string{`{"type":"resize","cols":0,"rows":10}`, `{"type":"resize","cols":100000,"rows":10}`, `{nope`, `{"type":"launch"}`, `{"type":"resize","cols":"x","rows":1}`} {
		c.Write(ctx, websocket.MessageText, []byte(bad))
		_, frames := readOutput(t, ctx, c, "")
		if len(frames) != 1 || frames[0].Type != "error" || len(frames[0].Code) == 0 || frames[0].Message == "" {
			t.Fatalf("control %s: frames %+v; want one error frame", bad, frames)
		}
	}
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","cols":123,"rows":45}`))
	c.Write(ctx, websocket.MessageBinary, []byte("stty size\n"))
	readOutput(t, ctx, c, "45 123")
	// The list shows it with one viewer.
	code, list := a.do(http.MethodGet, "/api/terminals", nil)
	ts, _ := list["terminals"].([]any)
	if code != 200 || len(ts) != 1 || ts[0].(obj)["viewers"] != float64(1) || ts[0].(obj)["cols"] != float64(123) {
		t.Fatalf("list = %d %v", code, list)
	}
	// The viewer leaves; the terminal stays, and a new viewer gets the replay.
	c.Close(websocket.StatusNormalClosure, "")
	c2, ready2 := a.dialTerminal(ctx, "ws1", "")
	if ready2.PID != ready.PID || ready2.ReplayBytes == 0 || ready2.Cols != 123 {
		t.Fatalf("reattach ready = %+v; want the same shell with a replay", ready2)
	}
	out, _ := readOutput(t, ctx, c2, "45 123")
	if strings.Count(out, "20 90") != 1 {
		t.Fatalf("replay %q: want the earlier output once", out)
	}
}

func TestTerminalExitFrame(t *testing.T) {
	a := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := a.dialTerminal(ctx, "ex", "")
	c.Write(ctx, websocket.MessageBinary, []byte("exit 3\n"))
	var exit *wsFrame
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("close: %v; want 1000", err)
			}
			break
		}
		if typ == websocket.MessageText {
			var f wsFrame
			json.Unmarshal(b, &f)
			if f.Type == "exit" {
				exit = &f
			}
		}
	}
	if exit == nil || string(exit.Code) != "3" {
		t.Fatalf("exit frame = %+v; want code 3", exit)
	}
}

func TestTerminalEndpointsAbuse(t *testing.T) {
	a := startAgent(t)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/api/terminals/t1", 400, "VALIDATION_FAILED"}, // no upgrade
		{http.MethodDelete, "/api/terminals/nope", 404, "TERMINAL_NOT_FOUND"},
		{http.MethodDelete, "/api/terminals/BAD", 400, "VALIDATION_FAILED"},
		{http.MethodDelete, "/api/terminals/a%2Fb", 400, "VALIDATION_FAILED"},
		{http.MethodPost, "/api/terminals/t1", 405, "METHOD_NOT_ALLOWED"},
		{http.MethodPost, "/api/terminals", 405, "METHOD_NOT_ALLOWED"},
	} {
		code, body := a.do(tc.method, tc.path, nil)
		if code != tc.status || body["code"] != tc.code {
			t.Errorf("%s %s = %d %v; want %d %s", tc.method, tc.path, code, body, tc.status, tc.code)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, q := range []string{"cols=0", "rows=1001", "cols=x", "shell=/etc/passwd", "shell=sh", "session=..%2Fx"} {
		_, resp, err := websocket.Dial(ctx, "ws://agent/api/terminals/q?"+q, &websocket.DialOptions{HTTPClient: a.client})
		if err == nil || resp == nil || resp.StatusCode != 400 {
			t.Errorf("connect ?%s = %v %v; want 400", q, resp, err)
		}
	}
	// Kill: the viewer gets the exit, the terminal is gone.
	c, _ := a.dialTerminal(ctx, "k1", "")
	code, body := a.do(http.MethodDelete, "/api/terminals/k1", nil)
	if code != 200 || body["terminal"].(obj)["exited"] != true {
		t.Fatalf("kill = %d %v", code, body)
	}
	for {
		_, _, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure {
				t.Fatalf("after kill: %v; want a normal close", err)
			}
			break
		}
	}
}
