package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestUnauthenticatedBodyNotAwaited sends a request without a token that announces a body and
// never sends it: the 401 comes at once and the connection is closed, so anyone who can connect
// cannot hold hutchd's connections open that way.
func TestUnauthenticatedBodyNotAwaited(t *testing.T) {
	srv := portsServer(t, true)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no reply while the body is outstanding: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d; want 401", resp.StatusCode)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("connection after the refusal: %v; want EOF (closed by the server)", err)
	}
}

// TestDotSegmentsRefused checks that paths with dot or empty segments get a 404 envelope, never
// a redirect that a client could follow with its method to another resource.
func TestDotSegmentsRefused(t *testing.T) {
	srv := portsServer(t, true)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{
		"/v1/sandboxes/box/process/..",
		"/v1/sandboxes/box/process/%2e%2e",
		"/v1/sandboxes/box/process/.",
		"/v1/sandboxes/box/./ports",
		"/v1/sandboxes//box",
		"/v1/sandboxes/box/process/%2E%2e/logs",
	} {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+p, nil)
		req.URL.Opaque = "//" + req.URL.Host + p // send the path as written, uncleaned
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" {
			t.Errorf("DELETE %s = %d (Location %q); want 404 without a redirect", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}
