package daemon

import (
	"testing"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/connlimit"
)

func TestClientLimits(t *testing.T) {
	tests := []struct {
		name              string
		maxConns, perAddr int
		nofile            uint64
		want              connlimit.Limits
	}{
		{"defaults, a raised limit", 0, config.DefaultMaxConnsPerClient, 1 << 20, connlimit.Limits{PerAddr: 256, Total: DefaultMaxConns}},
		{"defaults, a host's 20,000", 0, config.DefaultMaxConnsPerClient, 20000, connlimit.Limits{PerAddr: 256, Total: 2500}},
		{"defaults, a tiny limit", 0, config.DefaultMaxConnsPerClient, 4, connlimit.Limits{PerAddr: 256, Total: 1}},
		{"--max-conns wins over the limit", 50000, 10, 20000, connlimit.Limits{PerAddr: 10, Total: 50000}},
		{"--max-conns-per-client -1: no per-address cap", 0, -1, 1 << 20, connlimit.Limits{PerAddr: 0, Total: DefaultMaxConns}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clientLimits(config.Config{MaxConns: tt.maxConns, MaxConnsPerClient: tt.perAddr}, tt.nofile)
			if got != tt.want {
				t.Errorf("clientLimits = %+v, want %+v", got, tt.want)
			}
		})
	}
}
