package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/connlimit"
	"github.com/hutchdev/hutch/internal/preview"
	"github.com/hutchdev/hutch/internal/sandbox"
)

// previewServer is hutchd's preview listener: Host-routed reverse proxying of preview URLs
// into sandboxes.
type previewServer struct {
	srv   *http.Server
	ln    net.Listener
	proxy *preview.Proxy
	tls   bool
	log   *slog.Logger
}

// newPreview builds the exposed-ports Service (for the API) and, unless cfg.PreviewListen is
// "off", the preview listener that serves its URLs (pv is nil when off). With
// cfg.PreviewTLSCert and cfg.PreviewTLSKey set the listener serves HTTPS and URLs are https.
// URLs carry cfg.PreviewPublicPort, by default the listener's port.
func newPreview(cfg config.Config, ports preview.Store, lookup preview.PortLookup, dialer preview.Dialer, log *slog.Logger) (*preview.Service, *previewServer, error) {
	pc := preview.Config{Domain: cfg.PreviewDomain, TLS: cfg.PreviewTLSCert != "", PublicPort: cfg.PreviewPublicPort,
		ReservedPorts: []int{sandbox.AgentPort}}
	if cfg.PreviewListen == "off" {
		return preview.NewService(pc, ports, log), nil, nil
	}
	var tlsCfg *tls.Config
	if pc.TLS {
		cert, err := tls.LoadX509KeyPair(cfg.PreviewTLSCert, cfg.PreviewTLSKey)
		if err != nil {
			return nil, nil, fmt.Errorf("preview TLS certificate: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", cfg.PreviewListen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("preview listen: %w (is another hutchd running? use --preview-listen, or \"off\")", err)
		}
		return nil, nil, fmt.Errorf("preview listen: %w", err)
	}
	if pc.PublicPort == 0 {
		_, p, _ := net.SplitHostPort(ln.Addr().String())
		pc.PublicPort, _ = strconv.Atoi(p)
	}
	proxy := preview.NewProxy(cfg.PreviewDomain, lookup, dialer, log)
	proxy.SetMaxRequestBody(int64(cfg.PreviewMaxBodyBytes))
	pv := &previewServer{
		srv: &http.Server{
			Handler:           proxy,
			TLSConfig:         tlsCfg,
			ReadHeaderTimeout: ReadHeaderTimeout,
			IdleTimeout:       5 * time.Minute,
			ConnContext:       connlimit.ConnContext, // the proxy trusts routed connections
			ConnState:         connlimit.ConnState,   // idle ones may be closed for new ones
			// No WriteTimeout or ReadTimeout: streams, SSE and WebSockets live as long as
			// both ends want.
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		ln: ln, proxy: proxy, tls: pc.TLS, log: log,
	}
	return preview.NewService(pc, ports, log), pv, nil
}

// URL is the listener's base URL.
func (p *previewServer) URL() string {
	scheme := "http"
	if p.tls {
		scheme = "https"
	}
	return scheme + "://" + p.ln.Addr().String()
}

// serve serves until shutdown; it returns http.ErrServerClosed then.
func (p *previewServer) serve() error {
	if p.tls {
		return p.srv.ServeTLS(p.ln, "", "")
	}
	return p.srv.Serve(p.ln)
}

// shutdown stops accepting, waits for requests in flight until ctx ends, then cuts the rest
// (long streams) and drops pooled connections to sandboxes.
func (p *previewServer) shutdown(ctx context.Context) {
	if err := p.srv.Shutdown(ctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			p.log.Warn("preview shutdown", "err", err)
		}
		p.srv.Close()
	}
	p.proxy.Close()
}
