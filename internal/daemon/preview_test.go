package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/preview"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// hostDialer reaches a real listener on the host for every sandbox port (the sandbox manager
// is tested with real sandboxes in test/e2e).
type hostDialer struct{ addr string }

func (d hostDialer) DialPort(ctx context.Context, id sandboxid.ID, port int) (net.Conn, error) {
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", d.addr)
}

func (hostDialer) Touch(sandboxid.ID) {}

func (hostDialer) Hold(sandboxid.ID) func() { return func() {} }

func testStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Insert(context.Background(), store.Sandbox{ID: "sb1", Status: "running"}); err != nil {
		t.Fatal(err)
	}
	return st
}

// upstream is a real HTTP server standing for a service in the sandbox.
func upstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.Host+" proto "+r.Header.Get("X-Forwarded-Proto"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// servePreview starts pv and returns a client that sends every host to it.
func servePreview(t *testing.T, pv *previewServer, roots *x509.CertPool) *http.Client {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- pv.serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pv.shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve returned %v", err)
		}
	})
	addr := pv.ln.Addr().String()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func previewConfig(listen string) config.Config {
	cfg := config.Defaults()
	cfg.PreviewListen = listen
	return cfg
}

func TestPreviewHTTP(t *testing.T) {
	st := testStore(t)
	log := slog.New(slog.DiscardHandler)
	svc, pv, err := newPreview(previewConfig("127.0.0.1:0"), st, st, hostDialer{upstream(t)}, log)
	if err != nil {
		t.Fatal(err)
	}
	c := servePreview(t, pv, nil)
	_, port, _ := net.SplitHostPort(pv.ln.Addr().String())

	p, err := svc.Expose(context.Background(), "sb1", preview.ExposeRequest{Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	// URLs carry the listener's real port.
	if want := "http://8080-sb1-" + p.Token + ".localhost:" + port + "/"; p.URL != want {
		t.Fatalf("URL = %q; want %q", p.URL, want)
	}
	if st, body := get(t, c, p.URL); st != 200 || body != "hello from localhost:8080 proto http" {
		t.Fatalf("preview = %d %q", st, body)
	}
	st2, body := get(t, c, "http://localhost:"+port+"/")
	var env errdefs.Envelope
	if st2 != 404 || json.Unmarshal([]byte(body), &env) != nil || env.Code != errdefs.CodeInvalidToken {
		t.Fatalf("non-preview host = %d %q", st2, body)
	}

	// A second listener on the same address fails with a hint.
	if _, _, err := newPreview(previewConfig(pv.ln.Addr().String()), st, st, hostDialer{}, log); err == nil || !strings.Contains(err.Error(), "--preview-listen") {
		t.Fatalf("address in use: err = %v", err)
	}
}

func TestPreviewOff(t *testing.T) {
	st := testStore(t)
	cfg := previewConfig("off")
	cfg.PreviewDomain = "preview.example.com"
	cfg.PreviewPublicPort = 8443
	svc, pv, err := newPreview(cfg, st, st, hostDialer{}, slog.New(slog.DiscardHandler))
	if err != nil || pv != nil {
		t.Fatalf("off: %v, %v; want no listener", pv, err)
	}
	p, err := svc.Expose(context.Background(), "sb1", preview.ExposeRequest{Port: 3000, Token: "token_off"})
	if err != nil || p.URL != "http://3000-sb1-token_off.preview.example.com:8443/" {
		t.Fatalf("Expose = %+v, %v", p, err)
	}
}

func TestPreviewTLS(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, roots := selfSigned(t, dir)
	st := testStore(t)
	cfg := previewConfig("127.0.0.1:0")
	cfg.PreviewTLSCert, cfg.PreviewTLSKey = certPath, keyPath
	cfg.PreviewPublicPort = 443
	svc, pv, err := newPreview(cfg, st, st, hostDialer{upstream(t)}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := servePreview(t, pv, roots)
	p, err := svc.Expose(context.Background(), "sb1", preview.ExposeRequest{Port: 8080, Token: "token_tls"})
	if err != nil || p.URL != "https://8080-sb1-token_tls.localhost/" {
		t.Fatalf("Expose = %+v, %v", p, err)
	}
	if st, body := get(t, c, p.URL); st != 200 || body != "hello from localhost:8080 proto https" {
		t.Fatalf("https preview = %d %q", st, body)
	}
	// Browsers speak HTTP/2 over TLS: that works too.
	addr := pv.ln.Addr().String()
	h2 := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
	}
	defer h2.CloseIdleConnections()
	resp, err := (&http.Client{Transport: h2, Timeout: time.Minute}).Get(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != "hello from localhost:8080 proto https" {
		t.Fatalf("HTTP/2 preview = %s %d %q", resp.Proto, resp.StatusCode, body)
	}

	// Broken key material fails at start.
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.PreviewTLSKey = bad
	if _, _, err := newPreview(cfg, st, st, hostDialer{}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("bad key accepted")
	}
}

// selfSigned writes a certificate for *.localhost and its key, and returns a pool trusting it.
func selfSigned(t *testing.T, dir string) (certPath, keyPath string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hutch preview test"},
		DNSNames:              []string{"*.localhost", "localhost"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certPath, keyPath, roots
}
