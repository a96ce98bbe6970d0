package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/errdefs"
)

// terminalServer speaks the terminal protocol the way hutchd does: ready, then it echoes
// binary input as output, answers a resize with an error frame, and on "exit" input sends the
// exit frame and closes.
func terminalServer(t *testing.T) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/sb/terminals/{tid}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			io.WriteString(w, `{"code":"UNAUTHENTICATED","message":"wrong token","httpStatus":401}`)
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{TerminalSubprotocol}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		c.Write(ctx, websocket.MessageText, []byte(`{"type":"ready","id":"`+r.PathValue("tid")+`","cols":80,"rows":24,"pid":7,"replayBytes":3}`))
		c.Write(ctx, websocket.MessageBinary, []byte("old"))
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			switch {
			case typ == websocket.MessageText:
				c.Write(ctx, websocket.MessageText, []byte(`{"type":"error","code":"VALIDATION_FAILED","message":"bad size"}`))
			case string(b) == "exit":
				c.Write(ctx, websocket.MessageText, []byte(`{"type":"exit","code":3}`))
				c.Close(websocket.StatusNormalClosure, "shell exited")
				return
			default:
				c.Write(ctx, websocket.MessageBinary, b)
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTerminalClient(t *testing.T) {
	c := terminalServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	term, err := c.SandboxHandle("sb").Terminal(ctx, "main", TerminalOptions{})
	cancel() // ctx bounds the connection attempt only
	if err != nil {
		t.Fatal(err)
	}
	if r := term.Ready(); r.Type != "ready" || r.ID != "main" || r.PID != 7 || r.ReplayBytes != 3 {
		t.Fatalf("ready = %+v", r)
	}
	if ev := <-term.Events(); ev.Type != "ready" {
		t.Fatalf("first event %+v", ev)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(term, buf); err != nil || string(buf) != "old" {
		t.Fatalf("replay %q %v", buf, err)
	}
	term.Write([]byte("hello"))
	buf = make([]byte, 5)
	if _, err := io.ReadFull(term, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo %q %v", buf, err)
	}
	term.Resize(0, 0)
	if ev := <-term.Events(); ev.Type != "error" || !errdefs.IsCode(ev.Err, errdefs.CodeInvalidArgument) {
		t.Fatalf("event after a bad resize = %+v", ev)
	}
	term.Write([]byte("exit"))
	if _, err := io.Copy(io.Discard, term); err != nil {
		t.Fatalf("after exit: %v; want EOF", err)
	}
	if code, ok := term.ExitCode(); !ok || code != 3 {
		t.Fatalf("exit code %d %v", code, ok)
	}
	term.Close()

	// Close detaches: Read reports it.
	term, err = c.SandboxHandle("sb").Terminal(context.Background(), "two", TerminalOptions{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	term.Close()
	if _, err := io.Copy(io.Discard, term); !errors.Is(err, ErrTerminalClosed) {
		t.Fatalf("read after Close: %v; want ErrTerminalClosed", err)
	}

	// A refused upgrade gives the server's envelope.
	bad, _ := New(c.BaseURL(), "wrong")
	if _, err := bad.SandboxHandle("sb").Terminal(context.Background(), "main", TerminalOptions{}); !errdefs.IsCode(err, errdefs.CodeUnauthenticated) {
		t.Fatalf("wrong token: %v; want UNAUTHENTICATED", err)
	}
}
