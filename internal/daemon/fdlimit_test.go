package daemon

import (
	"testing"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/connlimit"
	"github.com/hutchdev/hutch/internal/egress/dns"
	"github.com/hutchdev/hutch/internal/egress/proxy"
)

func TestFDBudget(t *testing.T) {
	tests := []struct {
		name              string
		maxConns, perAddr int
		nofile            uint64
		want              fdBudget
	}{
		{"defaults, a raised limit", 0, config.DefaultMaxConnsPerClient, 1 << 20,
			fdBudget{proxy.MaxConns, dns.MaxTCPConns, connlimit.Limits{PerAddr: 256, Total: DefaultMaxConns, PerKey: DefaultMaxConns / 8}}},
		{"defaults, a host's 20,000", 0, config.DefaultMaxConnsPerClient, 20000,
			fdBudget{5000, 312, connlimit.Limits{PerAddr: 256, Total: 2500, PerKey: 312}}},
		{"defaults, a tiny limit", 0, config.DefaultMaxConnsPerClient, 4,
			fdBudget{1, 1, connlimit.Limits{PerAddr: 256, Total: 1, PerKey: 1}}},
		{"--max-conns wins over the limit", 50000, 10, 20000,
			fdBudget{5000, 312, connlimit.Limits{PerAddr: 10, Total: 50000, PerKey: 6250}}},
		{"--max-conns-per-client -1: no per-address cap", 0, -1, 1 << 20,
			fdBudget{proxy.MaxConns, dns.MaxTCPConns, connlimit.Limits{PerAddr: 0, Total: DefaultMaxConns, PerKey: DefaultMaxConns / 8}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newFDBudget(config.Config{MaxConns: tt.maxConns, MaxConnsPerClient: tt.perAddr}, tt.nofile)
			if got != tt.want {
				t.Errorf("newFDBudget = %+v, want %+v", got, tt.want)
			}
			// With the defaults the caps leave at least a fifth of the descriptors to the rest
			// of hutchd.
			if tt.maxConns == 0 && tt.nofile >= 1000 {
				used := 2*got.proxyConns + got.dnsTCPConns + 2*got.client.Total
				if reserve := int(tt.nofile) - used; reserve < int(tt.nofile)/5 {
					t.Errorf("caps take %d of %d descriptors, reserve %d", used, tt.nofile, reserve)
				}
			}
		})
	}
}
