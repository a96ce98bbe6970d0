package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/client"
)

// When hutchd stops, an open terminal's viewer gets a close frame (1001 going away) rather than
// a torn connection, and the terminal itself lives on: after the restart a new viewer gets the
// replay (a tester's finding).
func TestTerminalHutchdShutdown(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-term-shutdown", &client.SandboxOptions{InstanceType: "lite"})
	ctx := ctxT(t, 5*time.Minute)
	url := strings.Replace(d.URL(), "http://", "ws://", 1) + "/v1/sandboxes/" + sb.ID() + "/terminals/sd"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"hutch.v1", "bearer." + d.Token}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageBinary, []byte("echo before-restart\n")); err != nil {
		t.Fatal(err)
	}
	got := ""
	for !strings.Contains(got, "before-restart\r\n") {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += string(b)
	}
	stopped := make(chan struct{})
	go func() { d.Stop(); close(stopped) }()
	var status websocket.StatusCode = -1
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, _, err := c.Read(rctx); err != nil {
			status = websocket.CloseStatus(err)
			break
		}
	}
	<-stopped
	if err := d.Start(context.Background()); err != nil {
		t.Fatalf("restart: %v\n%s", err, d.LogTail())
	}
	if status != websocket.StatusGoingAway {
		t.Errorf("close status at hutchd's shutdown = %d, want %d (going away)", status, websocket.StatusGoingAway)
	}
	c2, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"hutch.v1", "bearer." + d.Token}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.CloseNow()
	replay := ""
	for !strings.Contains(replay, "before-restart") {
		_, b, err := c2.Read(ctx)
		if err != nil {
			t.Fatalf("after the restart: %v (got %q)", err, replay)
		}
		replay += string(b)
	}
}
