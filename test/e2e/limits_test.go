package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestTerminalFrameLimit: a terminal WebSocket message one byte over the 1 MiB bound
// (server.terminalFrameLimit) closes the connection with 1009 (message too big); a message of
// the bound itself is relayed.
func TestTerminalFrameLimit(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sandbox(t, "e2e-term-limit", nil)
	ctx := ctxT(t, 3*time.Minute)
	url := strings.Replace(d.URL(), "http://", "ws://", 1) + "/v1/sandboxes/e2e-term-limit/terminals/big?cols=80&rows=24"
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"hutch.v1"},
		HTTPHeader: http.Header{"Authorization": {"Bearer " + d.Token}}})
	if err != nil {
		t.Fatalf("dial: %v %v", resp, err)
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	typ, b, err := c.Read(ctx)
	var m map[string]any
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &m) != nil || m["type"] != "ready" {
		t.Fatalf("first frame %v %q %v; want ready", typ, b, err)
	}
	// Exactly the bound: a resize control frame padded with spaces to 1 MiB is relayed and
	// answered (the agent's bound is the same).
	ctl := []byte(`{"type":"resize","cols":100,"rows":30}`)
	ctl = append(ctl, bytes.Repeat([]byte(" "), 1<<20-len(ctl))...)
	if err := c.Write(ctx, websocket.MessageText, ctl); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte("echo size-$(stty size | tr ' ' x)\n")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for !strings.Contains(out.String(), "size-30x100") {
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after a 1 MiB message: %v; output %q", err, out.String())
		}
		if typ == websocket.MessageBinary {
			out.Write(b)
		}
	}
	// One byte over: closed with 1009.
	if err := c.Write(ctx, websocket.MessageBinary, bytes.Repeat([]byte("#"), 1<<20+1)); err != nil {
		t.Fatal(err)
	}
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		if st := websocket.CloseStatus(err); st != websocket.StatusMessageTooBig {
			t.Fatalf("after a message of 1 MiB + 1: %v (close status %d); want 1009", err, st)
		}
		break
	}
}
