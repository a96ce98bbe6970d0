package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/blocked"
)

// clientHello returns the bytes a crypto/tls client sends first for serverName.
func clientHello(t *testing.T, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Handshake()
		a.Close()
	}()
	var buf bytes.Buffer
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:5]))
	if _, err := io.ReadFull(b, body); err != nil {
		t.Fatal(err)
	}
	b.Close()
	buf.Write(hdr)
	buf.Write(body)
	return buf.Bytes()
}

// twoRecords re-frames one handshake record as two records (a ClientHello split across
// records, as large post-quantum key shares produce).
func twoRecords(rec []byte) []byte {
	body := rec[5:]
	half := len(body) / 2
	var out []byte
	for _, part := range [][]byte{body[:half], body[half:]} {
		h := []byte{rec[0], rec[1], rec[2], 0, 0}
		binary.BigEndian.PutUint16(h[3:], uint16(len(part)))
		out = append(append(out, h...), part...)
	}
	return out
}

// feed writes data to one end of a TCP loopback pair in chunks of size and returns the other.
func feed(t *testing.T, data []byte, size int) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); r.Close() })
	go func() {
		for len(data) > 0 {
			n := min(size, len(data))
			w.Write(data[:n])
			data = data[n:]
			time.Sleep(time.Millisecond)
		}
	}()
	r.SetDeadline(time.Now().Add(5 * time.Second))
	return r
}

func TestPeekClientHello(t *testing.T) {
	hello := clientHello(t, "Registry.PKGS.Example.net")
	tests := []struct {
		name  string
		data  []byte
		chunk int
		sni   string
		ok    bool
	}{
		{"one segment", hello, len(hello), "registry.pkgs.example.net", true},
		{"byte by byte", hello, 1, "registry.pkgs.example.net", true},
		{"two records", twoRecords(hello), 100, "registry.pkgs.example.net", true},
		{"no sni", clientHello(t, ""), 4096, "", true},
		{"plain http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 4096, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := feed(t, tt.data, tt.chunk)
			sni, peeked, err := peekClientHello(c)
			if (err == nil) != tt.ok {
				t.Fatalf("peekClientHello err = %v; want ok=%v", err, tt.ok)
			}
			if !tt.ok {
				return
			}
			if strings.ToLower(sni) != tt.sni {
				t.Errorf("sni = %q; want %q", sni, tt.sni)
			}
			if !bytes.Equal(peeked, tt.data) {
				t.Errorf("peeked %d bytes; want the %d sent", len(peeked), len(tt.data))
			}
		})
	}
}

func TestPeekClientHelloOversized(t *testing.T) {
	// An endless stream of one-byte handshake records never completes a hello.
	rec := []byte{22, 3, 1, 0, 1, 1}
	c := feed(t, bytes.Repeat(rec, 4000), 4096)
	if _, _, err := peekClientHello(c); err == nil {
		t.Fatal("peekClientHello accepted more than 16 KiB")
	}
}

func TestGuardAndDial(t *testing.T) {
	p, err := New(Config{
		Identify:  func(netip.Addr) (string, netip.Addr, bool) { return "", netip.Addr{}, false },
		Floor:     blocked.New(),
		Upstreams: map[string]netip.AddrPort{},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tt := range []struct {
		addr   string
		denied bool
	}{
		{"127.0.0.1:80", true},
		{"169.254.169.254:80", true},
		{"[::ffff:10.0.0.1]:443", true},
		{"203.0.113.80:443", false},
	} {
		err := p.guard(context.Background(), "tcp4", tt.addr, nil)
		if got := errdefs.IsCode(err, errdefs.CodeEgressDenied); got != tt.denied {
			t.Errorf("guard(%s) = %v; want denied=%v", tt.addr, err, tt.denied)
		}
	}
	// Names resolving to the floor are refused before connect; IP literals are refused outright.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, addr := range []string{"localhost:" + port, "127.0.0.1:" + port} {
		if c, err := p.dial(context.Background(), "tcp", addr); !errdefs.IsCode(err, errdefs.CodeEgressDenied) {
			if c != nil {
				c.Close()
			}
			t.Errorf("dial(%s) = %v; want EGRESS_DENIED", addr, err)
		}
	}
	// Operator upstreams bypass the blocked.
	p.cfg.Upstreams["git.internal"] = netip.MustParseAddrPort(ln.Addr().String())
	c, err := p.dial(context.Background(), "tcp", "git.internal:443")
	if err != nil {
		t.Fatalf("dial upstream: %v", err)
	}
	c.Close()
}
