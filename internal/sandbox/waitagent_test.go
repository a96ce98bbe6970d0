package sandbox

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
	"github.com/hutchdev/hutch/internal/agentclient"
)

// pingAgent is a client of a fake agent whose ping answers with protocol version proto after
// failing the first fails pings; pings counts them.
func pingAgent(t *testing.T, proto string, fails int32, pings *atomic.Int32) *agentclient.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pings.Add(1) <= fails {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set(agentapi.HeaderProtocol, proto)
		io.WriteString(w, `{"success":true,"status":"healthy","version":"x","timestamp":"2026-01-01T00:00:00Z"}`)
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return agentclient.New("sb1", tr)
}

// TestWaitAgent: waitAgent waits through failed pings for an agent of hutchd's protocol, and
// gives up at the first answer of an agent of another version (AGENT_PROTOCOL_MISMATCH), which
// waiting would not change.
func TestWaitAgent(t *testing.T) {
	var pings atomic.Int32
	if err := waitAgent(context.Background(), pingAgent(t, agentapi.Version, 3, &pings), time.Minute); err != nil || pings.Load() != 4 {
		t.Fatalf("waitAgent = %v after %d pings; want nil after 4", err, pings.Load())
	}
	pings.Store(0)
	err := waitAgent(context.Background(), pingAgent(t, "99", 0, &pings), 2*time.Second)
	if !errdefs.IsCode(err, errdefs.CodeAgentProtocol) || pings.Load() != 1 {
		t.Fatalf("waitAgent = %v after %d pings; want AGENT_PROTOCOL_MISMATCH after 1", err, pings.Load())
	}
}
