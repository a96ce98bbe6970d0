package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// TestSandboxRedactorCoversThePolicy: the redactor for any response of a sandbox holds every
// value its policy can inject or swap (every rule's secrets, Basic credentials, placeholders'
// real values), is reused while nothing changes and follows a rotated secret.
func TestSandboxRedactorCoversThePolicy(t *testing.T) {
	secrets := map[string]string{"A": "Zq7uV2mP9xK4rT1bN8cW3yH6dL", "B": "Hx4kP8sQ2wE6rT0yU3iO7pLmNb", "PW": "pw-9f8e7d6c5b4a3210", "PH": "sk-REAL-key-0123456789abcdef"}
	spec := policy.Spec{
		Rules: []policy.Rule{
			{ID: "a", Hosts: []string{"a.example.test"}, Action: policy.ActionInject, Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.A}"}}},
			{ID: "b", Hosts: []string{"b.example.test"}, Action: policy.ActionInject, Inject: &policy.Inject{SetHeaders: map[string]string{"X-Key": "${secrets.B}"},
				BasicAuth: &policy.BasicAuth{Username: "bob", Password: "${secrets.PW}"}}},
		},
		Placeholders: []policy.Placeholder{{Secret: "PH", Hosts: []string{"a.example.test"}, Prefix: "sk-"}},
	}
	pol, err := policy.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	tok := inject.NewPlaceholder()
	set := inject.NewSet(spec.Placeholders, map[string]string{"PH": tok})
	p := &Proxy{icpt: &interceptor{cfg: InterceptConfig{Secret: func(_ context.Context, name string) ([]byte, error) {
		v, ok := secrets[name]
		if !ok {
			return nil, errdefs.Newf(errdefs.CodeSecretNotFound, "no secret %s", name)
		}
		return []byte(v), nil
	}}}}
	red := p.sandboxRedactor(context.Background(), "sbx", pol, set, nil)
	for _, tc := range []struct{ in, want string }{
		{"a=" + secrets["A"], "a=[redacted:A]"},
		{"b=" + secrets["B"], "b=[redacted:B]"},
		{"basic=bob:" + secrets["PW"], "basic=[redacted:basic-auth]"},
		{"ph=" + secrets["PH"], "ph=sk-" + tok},
		{"upper=" + strings.ToUpper(secrets["A"]), "upper=[redacted:A]"},
	} {
		if got, _ := red.String(tc.in); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	if again := p.sandboxRedactor(context.Background(), "sbx", pol, set, nil); again != red {
		t.Error("redactor rebuilt though nothing changed")
	}
	secrets["A"] = "Rotated0123456789abcdefXYZ"
	rot := p.sandboxRedactor(context.Background(), "sbx", pol, set, nil)
	if got, _ := rot.String("a=" + secrets["A"]); got != "a=[redacted:A]" {
		t.Errorf("rotated secret: %q", got)
	}
}

// TestRedactUpgrade: the stream after a 101 is redacted on its way to the sandbox, a form
// split between upstream writes included, while writes go upstream unchanged; an accepted
// WebSocket extension is refused.
func TestRedactUpgrade(t *testing.T) {
	const secret = "Zq7uV2mP9xK4rT1bN8cW3yH6dL"
	red := inject.NewRedactor(inject.Forms([]byte(secret), []byte("[redacted:A]")))
	upgrade := func(t *testing.T, ext string) (*http.Response, net.Conn) {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		srv := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			http.ReadRequest(bufio.NewReader(c))
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n"+ext+"\r\n")
			srv <- c
		}()
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "x")
		resp, err := (&http.Transport{}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		c := <-srv
		t.Cleanup(func() { c.Close() })
		return resp, c
	}
	t.Run("stream redacted", func(t *testing.T) {
		resp, up := upgrade(t, "")
		var count atomic.Int64
		if err := redactUpgrade(resp, red, &count); err != nil {
			t.Fatal(err)
		}
		rwc := resp.Body.(io.ReadWriteCloser)
		go func() {
			io.WriteString(up, "S:"+secret[:13])
			time.Sleep(20 * time.Millisecond)
			io.WriteString(up, secret[13:]+"\n")
			up.Close()
		}()
		got, _ := io.ReadAll(rwc)
		if !strings.HasPrefix(string(got), "S:[redacted:A]") || strings.Contains(string(got), secret[:9]) || strings.Contains(string(got), secret[17:]) || count.Load() < 1 {
			t.Errorf("got %q, %d replacements", got, count.Load())
		}
		if _, err := io.WriteString(rwc, "to-upstream"); err != nil {
			t.Error(err)
		}
	})
	t.Run("a message ending in bytes of a form is not held back", func(t *testing.T) {
		resp, up := upgrade(t, "")
		var count atomic.Int64
		if err := redactUpgrade(resp, red, &count); err != nil {
			t.Fatal(err)
		}
		// "Zq" starts the secret: a plain Reader would hold it until more data came.
		io.WriteString(up, "echo:Zq")
		got := make(chan string, 1)
		go func() {
			b := make([]byte, 64)
			n, _ := io.ReadAtLeast(resp.Body, b, len("echo:Zq"))
			got <- string(b[:n])
		}()
		select {
		case s := <-got:
			if s != "echo:Zq" {
				t.Errorf("got %q", s)
			}
		case <-time.After(10 * time.Second):
			t.Error("the stream held the message back while the upstream waited")
		}
		resp.Body.Close()
	})
	t.Run("extension refused", func(t *testing.T) {
		resp, _ := upgrade(t, "Sec-WebSocket-Extensions: permessage-deflate\r\n")
		var count atomic.Int64
		if err := redactUpgrade(resp, red, &count); !errdefs.IsCode(err, errdefs.CodeEgressUnredactable) {
			t.Errorf("want %s, got %v", errdefs.CodeEgressUnredactable, err)
		}
	})
}
