package proxy

import (
	"net/netip"
	"testing"

	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/blocked"
)

// TestAdmitConn checks both caps of admitConn: one sandbox's, and all sandboxes' together,
// which holds even for a sandbox far below its own.
func TestAdmitConn(t *testing.T) {
	p, err := New(Config{
		Identify: func(netip.Addr) (string, netip.Addr, bool) { return "", netip.Addr{}, false },
		Floor:    blocked.New(),
		Audit:    func(string, audit.Event) {},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		open, total int
		ok          bool
	}{
		{"below both", 0, 0, true},
		{"one below the sandbox's cap", MaxConnsPerSandbox - 1, MaxConnsPerSandbox - 1, true},
		{"at the sandbox's cap", MaxConnsPerSandbox, MaxConnsPerSandbox, false},
		{"one below the cap of all", 0, MaxConns - 1, true},
		{"at the cap of all, the sandbox holding none", 0, MaxConns, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.mu.Lock()
			err := p.admitConn("sbx", tt.open, tt.total)
			p.mu.Unlock()
			if (err == nil) != tt.ok {
				t.Errorf("admitConn(open %d, total %d) = %v, want ok %v", tt.open, tt.total, err, tt.ok)
			}
		})
	}
}

// TestAdmitConnConfiguredCap: Config.MaxConns lowers the cap of all sandboxes (hutchd derives
// it from its fd limit); above MaxConns it is MaxConns.
func TestAdmitConnConfiguredCap(t *testing.T) {
	for _, tt := range []struct{ cfg, want int }{{10, 10}, {0, MaxConns}, {MaxConns + 1, MaxConns}} {
		p, err := New(Config{
			Identify: func(netip.Addr) (string, netip.Addr, bool) { return "", netip.Addr{}, false },
			Floor:    blocked.New(),
			MaxConns: tt.cfg,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		below, at := p.admitConn("sbx", 0, tt.want-1), p.admitConn("sbx", 0, tt.want)
		p.mu.Unlock()
		if below != nil || at == nil {
			t.Errorf("Config.MaxConns %d: admitConn below %d = %v, at it = %v; want the cap %d", tt.cfg, tt.want, below, at, tt.want)
		}
	}
}
