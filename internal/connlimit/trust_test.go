package connlimit

import (
	"net"
	"net/http"
	"testing"
)

// TestTrustedCaps: the caps of trusted connections, per TrustKey key and at the total.
func TestTrustedCaps(t *testing.T) {
	type step struct {
		from string
		// trust: "" leaves the connection untrusted, "*" is Trust, else TrustKey(trust).
		trust string
		idle  bool // told idle through ConnState once trusted
		// admitted: Accept returns the connection; else it is closed at once.
		admitted bool
	}
	tests := []struct {
		name  string
		lim   Limits
		steps []step
		open  []int // the steps whose connections must still be open at the end
	}{
		{
			name: "total: the oldest idle trusted connection is closed for a new one",
			lim:  Limits{Total: 3},
			steps: []step{{"127.0.0.1", "a", false, true}, {"127.0.0.1", "b", true, true}, {"127.0.0.1", "c", true, true},
				{"127.0.0.2", "", false, true}},
			open: []int{0, 2, 3},
		},
		{
			name:  "total: idle connections trusted by Trust are closed for a new one too",
			lim:   Limits{Total: 2},
			steps: []step{{"127.0.0.1", "*", true, true}, {"127.0.0.1", "*", true, true}, {"127.0.0.2", "", false, true}},
			open:  []int{1, 2},
		},
		{
			name:  "total: untrusted connections go before idle trusted ones",
			lim:   Limits{Total: 3},
			steps: []step{{"127.0.0.1", "a", true, true}, {"127.0.0.1", "", false, true}, {"127.0.0.1", "b", true, true}, {"127.0.0.2", "", false, true}},
			open:  []int{0, 2, 3},
		},
		{
			name:  "total: when every connection is trusted and busy, the new one is closed at once",
			lim:   Limits{Total: 2},
			steps: []step{{"127.0.0.1", "a", false, true}, {"127.0.0.1", "b", false, true}, {"127.0.0.2", "", false, false}},
			open:  []int{0, 1},
		},
		{
			name: "per key: connections past PerKey stay untrusted, the oldest closed first at the total",
			lim:  Limits{Total: 4, PerKey: 2},
			steps: []step{{"127.0.0.1", "a", false, true}, {"127.0.0.1", "a", false, true}, {"127.0.0.1", "a", false, true},
				{"127.0.0.1", "a", false, true}, {"127.0.0.2", "b", false, true}, {"127.0.0.2", "b", false, true}},
			open: []int{0, 1, 4, 5},
		},
		{
			name:  "per key: connections past PerKey count against their address's cap",
			lim:   Limits{PerAddr: 1, PerKey: 1},
			steps: []step{{"127.0.0.1", "a", false, true}, {"127.0.0.1", "a", false, true}, {"127.0.0.1", "a", false, true}},
			open:  []int{0, 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.lim, nil)
			clients := make([]net.Conn, len(tt.steps))
			for i, s := range tt.steps {
				c, srv := r.dial(t, s.from, s.admitted)
				clients[i] = c
				if srv == nil {
					continue
				}
				lc := srv.(*Conn)
				ConnState(lc, http.StateActive)
				switch s.trust {
				case "":
				case "*":
					lc.Trust()
				default:
					lc.TrustKey(s.trust)
				}
				if s.idle {
					ConnState(lc, http.StateIdle)
				}
			}
			wantOpen := map[int]bool{}
			for _, i := range tt.open {
				wantOpen[i] = true
			}
			for i, c := range clients {
				if closed := closedByServer(c); closed == wantOpen[i] {
					t.Errorf("connection %d (%+v): closed = %v, want %v", i, tt.steps[i], closed, !wantOpen[i])
				}
			}
			if got := r.l.Open(); got != len(tt.open) {
				t.Errorf("Open() = %d, want %d", got, len(tt.open))
			}
		})
	}
}

// TestTrustKeyReleased: a closed trusted connection gives its key's place back.
func TestTrustKeyReleased(t *testing.T) {
	r := newRig(t, Limits{PerAddr: 1, PerKey: 1}, nil)
	_, s1 := r.dial(t, "127.0.0.1", true)
	s1.(*Conn).TrustKey("a")
	s1.Close()
	c2, s2 := r.dial(t, "127.0.0.1", true)
	s2.(*Conn).TrustKey("a") // trusted: the key's one place is free again
	r.dial(t, "127.0.0.1", true)
	if closedByServer(c2) {
		t.Fatal("the connection trusted after its key's place was freed was closed as untrusted")
	}
}
