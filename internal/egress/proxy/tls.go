package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/blocked"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// maxHello bounds how many bytes are read while looking for a complete ClientHello.
const maxHello = 16 << 10

// serveTLS handles one redirected TLS connection: peek SNI, decide, dial by name, splice.
func (p *Proxy) serveTLS(c *conn) {
	defer c.Close()
	log := p.log.With("sandbox_id", c.sandboxID, "orig_dst", c.orig.String())
	c.SetDeadline(time.Now().Add(helloTimeout))
	sni, peeked, err := peekClientHello(c.TCPConn)
	if err != nil {
		log.Debug("egress tls: no client hello", "err", err)
		return
	}
	ev := audit.Event{Kind: audit.KindConn, Mode: "tunnel", OrigDst: c.orig.String(), Port: int(c.orig.Port())}
	host, err := policy.CanonicalHost(sni)
	if err != nil {
		log.Debug("egress tls denied", "sni", sni, "err", err)
		ev.Decision, ev.Reason = "deny", "TLS without a valid SNI host name"
		p.cfg.Audit(c.sandboxID, ev)
		return
	}
	ev.Host = host
	log = log.With("sni", host)
	_, upstream := p.cfg.Upstreams[host]
	if !upstream && blocked.DeniedName(host) {
		log.Debug("egress tls denied by name floor")
		ev.Decision, ev.Reason = "deny", "address floor"
		p.cfg.Audit(c.sandboxID, ev)
		return
	}
	port := int(c.orig.Port())
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout) //nolint:forbidigo // a proxied connection is its own root; the timeout bounds it
	defer cancel()
	d := p.cfg.Policy.Decide(ctx, policy.Request{SandboxID: c.sandboxID, Kind: policy.KindTLS, Host: host, Port: port, Upstream: upstream})
	if d.Action == policy.Intercept && p.icpt != nil {
		p.intercept(c, host, peeked, log)
		return
	}
	if d.Action != policy.Allow {
		log.Debug("egress tls denied by policy", "reason", d.Reason)
		ev.Decision, ev.Reason = "deny", d.Reason
		if d.Action == policy.Intercept {
			ev.Reason = "interception is not configured"
		}
		p.cfg.Audit(c.sandboxID, ev)
		return
	}
	start := time.Now()
	ev.Decision = "tunnel"
	defer func() {
		ev.DurMs = time.Since(start).Milliseconds()
		p.cfg.Audit(c.sandboxID, ev)
	}()
	up, err := p.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		log.Debug("egress tls dial failed", "err", err)
		ev.Decision, ev.Reason = "deny", "upstream unreachable or refused"
		if !errdefs.IsCode(err, errdefs.CodeEgressDenied) {
			ev.Decision = "error"
		}
		return
	}
	if !c.attach(up) {
		return
	}
	c.SetDeadline(time.Time{})
	c.setDest(policy.KindTLS, host, false, upstream)
	if _, err := up.Write(peeked); err != nil {
		log.Debug("egress tls replay failed", "err", err)
		return
	}
	log.Debug("egress tls tunnel")
	splice(c.TCPConn, up)
}

// splice copies both ways until both directions have ended, half-closing each write side as
// its source reaches EOF. Closing either connection (Proxy.Close, ForgetSandbox) ends it.
func splice(client *net.TCPConn, up net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(up, client) // either side ending ends the relay
		closeWrite(up)
	}()
	_, _ = io.Copy(client, up)
	client.CloseWrite()
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// errHelloRead stops the handshake once the ClientHello is parsed.
var errHelloRead = errors.New("client hello read")

// peekClientHello reads from c until crypto/tls has parsed a complete ClientHello (which may
// span several records and segments) and returns its SNI (possibly empty) and every byte read,
// for replay upstream. Nothing is written to c.
func peekClientHello(c net.Conn) (sni string, peeked []byte, err error) {
	rc := &recordingConn{Conn: c}
	var got bool
	cfg := &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, got = h.ServerName, true
			return nil, errHelloRead
		},
	}
	herr := tls.Server(rc, cfg).Handshake()
	if !got {
		return "", nil, fmt.Errorf("parse client hello: %w", herr)
	}
	return sni, rc.buf.Bytes(), nil
}

// recordingConn records what is read (at most maxHello bytes) and discards writes, so the TLS
// server's alert on the aborted handshake never reaches the client.
type recordingConn struct {
	net.Conn
	buf bytes.Buffer
}

func (r *recordingConn) Read(b []byte) (int, error) {
	room := maxHello - r.buf.Len()
	if room <= 0 {
		return 0, errors.New("client hello larger than 16 KiB")
	}
	if len(b) > room {
		b = b[:room]
	}
	n, err := r.Conn.Read(b)
	r.buf.Write(b[:n])
	return n, err
}

func (r *recordingConn) Write(b []byte) (int, error) { return len(b), nil }
