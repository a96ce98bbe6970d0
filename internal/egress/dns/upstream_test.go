package dns

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestServersResolver: no servers is the host's resolver; otherwise the first server that
// accepts is dialled, whatever address the resolver asked for, and when none accepts the
// last one's error is returned.
func TestServersResolver(t *testing.T) {
	if ServersResolver(nil) != nil {
		t.Fatal("ServersResolver(nil) is not nil")
	}
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	closedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := closedLn.Addr().String()
	closedLn.Close()
	for _, c := range []struct {
		name    string
		servers []string
		want    string // the address dialled; "" = an error
	}{
		{"one", []string{open.Addr().String()}, open.Addr().String()},
		{"first refuses", []string{closed, open.Addr().String()}, open.Addr().String()},
		{"first accepts", []string{open.Addr().String(), closed}, open.Addr().String()},
		{"all refuse", []string{closed, closed}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ServersResolver(c.servers)
			if r == nil || !r.PreferGo {
				t.Fatalf("resolver %+v", r)
			}
			conn, err := r.Dial(context.Background(), "tcp", "192.0.2.1:53")
			if c.want == "" {
				if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("Dial = %v, %v; want connection refused", conn, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if got := conn.RemoteAddr().String(); got != c.want {
				t.Errorf("dialled %s, want %s", got, c.want)
			}
		})
	}
}
