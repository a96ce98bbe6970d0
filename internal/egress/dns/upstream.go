package dns

import (
	"context"
	"net"
)

// ServersResolver is a resolver of sandbox destinations (egress.Config.Resolver) that asks
// servers (ip:port), trying them in order until one can be dialled; none: nil (the host's
// resolver).
func ServersResolver(servers []string) *net.Resolver {
	if len(servers) == 0 {
		return nil
	}
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			var last error
			for _, s := range servers {
				c, err := d.DialContext(ctx, network, s)
				if err == nil {
					return c, nil
				}
				last = err
			}
			return nil, last
		},
	}
}
