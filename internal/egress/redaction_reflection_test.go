package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// reflectionLeak reports a run of MinRun(len(v)) characters of v in out, compared without
// regard to case, or in lower-case hex.
func reflectionLeak(out, v string) string {
	lo, n := strings.ToLower(out), inject.MinRun(len(v))
	for a := 0; a+n <= len(v); a++ {
		s := strings.ToLower(v[a : a+n])
		if strings.Contains(lo, s) {
			return s
		}
		if h := hex.EncodeToString([]byte(v[a : a+n])); strings.Contains(lo, h) {
			return "hex " + h
		}
	}
	return ""
}

// TestRedactionUpgradedStream: after 101 Switching Protocols the upgraded stream an upstream
// sends back to the sandbox is redacted like a body (an injected secret, the real value
// behind a placeholder, split between two upstream writes), on intercepted TLS and on plain
// HTTP (whose secret-carrying request goes upstream over TLS); an upstream that accepts a
// WebSocket extension (compression the redactor cannot see through) is refused.
func TestRedactionUpgradedStream(t *testing.T) {
	const secret = "Zq7uV2mP9xK4rT1bN8cW3yH6dL"
	const phReal = "sk-REAL-key-0123456789abcdef"
	tok := inject.NewPlaceholder()
	ph := "sk-" + tok
	ih, sb := newInterceptHarnessWith(t, map[string]string{"API_TOKEN": secret, "OPENAI": phReal}, policy.Spec{
		Inspect: policy.InspectAll,
		Rules: []policy.Rule{{ID: "reflect", Hosts: []string{"reflect1.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"X-Api-Key": "${secrets.API_TOKEN}"}}}},
		Placeholders: []policy.Placeholder{{Secret: "OPENAI", Env: "OPENAI_API_KEY", Hosts: []string{"reflect1.example.test"}, Prefix: "sk-"}},
	}, map[string]string{"OPENAI": tok}, nil)
	ih.net.StartReflectorH1(t, "reflect1.example.test")
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(ih.caFile)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("CA: %v", err)
	}
	exchange := func(t *testing.T, tlsConn bool, query, extra string) string {
		t.Helper()
		port := "80"
		if tlsConn {
			port = "443"
		}
		c, err := dialFrom(t, sb, "tcp", net.JoinHostPort(egresstest.ReflectH1IP, port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var rw net.Conn = c
		if tlsConn {
			rw = tls.Client(c, &tls.Config{ServerName: "reflect1.example.test", RootCAs: pool, NextProtos: []string{"http/1.1"}})
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(rw, "GET /reflect?%s HTTP/1.1\r\nHost: reflect1.example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n%s\r\n", query, extra)
		b, _ := io.ReadAll(rw)
		return string(b)
	}
	for _, tlsConn := range []bool{true, false} {
		for _, tc := range []struct {
			name, query, extra, value, want string
		}{
			{"injected", "h=X-Api-Key&upgrade=1&pre=UPGRADED-STREAM:&post=%0A", "", secret, "UPGRADED-STREAM:[redacted:API_TOKEN]"},
			{"placeholder", "h=Authorization&upgrade=1&pre=UPGRADED-STREAM:&post=%0A", "Authorization: Bearer " + ph + "\r\n", phReal, "UPGRADED-STREAM:Bearer " + ph},
		} {
			t.Run(fmt.Sprintf("%s tls=%v", tc.name, tlsConn), func(t *testing.T) {
				out := exchange(t, tlsConn, tc.query, tc.extra)
				if !strings.HasPrefix(out, "HTTP/1.1 101 ") || !strings.Contains(out, "\r\n\r\n"+tc.want) {
					t.Errorf("want 101 then %q: %q", tc.want, out)
				}
				if l := reflectionLeak(out, tc.value); l != "" {
					t.Errorf("the sandbox saw %q on the upgraded stream: %q", l, out)
				}
			})
		}
	}
	t.Run("an accepted WebSocket extension is refused", func(t *testing.T) {
		out := exchange(t, true, "h=X-Api-Key&upgrade=1&ext=1", "Sec-WebSocket-Extensions: permessage-deflate\r\n")
		if !strings.HasPrefix(out, "HTTP/1.1 502 ") || !strings.Contains(out, string(errdefs.CodeEgressUnredactable)) || reflectionLeak(out, secret) != "" {
			t.Errorf("want 502 %s: %q", errdefs.CodeEgressUnredactable, out)
		}
	})
}

// TestRedactionStoredReflection: every response the proxy decrypts for a sandbox is redacted
// of every value the sandbox's policy can inject or swap, not only of what that request
// carried: an upstream that stores the credential one request carried (a rule's injected
// secret, a placeholder's real value) and dumps it on a path no rule matches, on another
// rule's host or on a host no rule names, hands the sandbox the redaction marker. Values come
// back upper-cased or as hex redacted too.
func TestRedactionStoredReflection(t *testing.T) {
	const secret = "Zq7uV2mP9xK4rT1bN8cW3yH6dL"
	const other = "Hx4kP8sQ2wE6rT0yU3iO7pLmNb"
	const phReal = "sk-REAL-key-0123456789abcdef"
	tok := inject.NewPlaceholder()
	ph := "sk-" + tok
	onReflect := &policy.Match{Path: &policy.PathMatch{Prefix: "/reflect"}}
	ih, sb := newInterceptHarnessWith(t, map[string]string{"API_TOKEN": secret, "OTHER_TOKEN": other, "OPENAI": phReal}, policy.Spec{
		Inspect: policy.InspectAll,
		Rules: []policy.Rule{
			{ID: "reflect", Hosts: []string{"reflect.example.test"}, Match: onReflect, Action: policy.ActionInject,
				Inject: &policy.Inject{SetHeaders: map[string]string{"X-Api-Key": "${secrets.API_TOKEN}"}}},
			{ID: "other", Hosts: []string{"other.example.test"}, Match: onReflect, Action: policy.ActionInject,
				Inject: &policy.Inject{SetHeaders: map[string]string{"X-Other-Key": "${secrets.OTHER_TOKEN}"}}},
		},
		Placeholders: []policy.Placeholder{{Secret: "OPENAI", Env: "OPENAI_API_KEY", Hosts: []string{"reflect.example.test"}, Prefix: "sk-"}},
	}, map[string]string{"OPENAI": tok}, nil)
	ih.net.StartReflector(t, "reflect.example.test")
	// The same upstream (and storage) under a host another rule names and one no rule names.
	ih.net.SetRecord("other.example.test", egresstest.ReflectIP)
	ih.net.SetRecord("norule.example.test", egresstest.ReflectIP)
	get := func(t *testing.T, url string, extra ...string) (string, string) {
		t.Helper()
		out, status, _ := curl(sb, append([]string{"--cacert", ih.caFile, "-D", "-"}, append(extra, url)...)...)
		return out, status
	}
	for _, tc := range []struct {
		name, store string
		extra       []string
		value, want string
	}{
		{"injected", "h=X-Api-Key", nil, secret, "stored=[redacted:API_TOKEN]"},
		{"placeholder", "h=Authorization", []string{"-H", "Authorization: Bearer " + ph}, phReal, "stored=Bearer " + ph},
	} {
		if out, status := get(t, "https://reflect.example.test/reflect?store=1&pre=stored%3D&"+tc.store, tc.extra...); status != "200" || reflectionLeak(out, tc.value) != "" {
			t.Fatalf("%s: storing: %s %q", tc.name, status, out)
		}
		for _, host := range []string{"reflect.example.test", "other.example.test", "norule.example.test"} {
			t.Run(tc.name+" dumped on "+host, func(t *testing.T) {
				for _, h2 := range []string{"--http1.1", "--http2"} {
					out, status := get(t, "https://"+host+"/dump", h2)
					if status != "200" || !strings.HasSuffix(out, "\r\n\r\n"+tc.want) {
						t.Errorf("%s: want 200 %q: %s %q", h2, tc.want, status, out)
					}
					if l := reflectionLeak(out, tc.value); l != "" {
						t.Errorf("%s: the sandbox saw %q: %q", h2, l, out)
					}
				}
			})
		}
	}
	t.Run("upper-cased and hex reflections", func(t *testing.T) {
		for _, enc := range []string{"upper", "hex"} {
			out, status := get(t, "https://reflect.example.test/reflect?h=X-Api-Key&pre=v%3D&enc="+enc)
			body := out[strings.LastIndex(out, "\r\n\r\n")+4:]
			if status != "200" || !strings.Contains(body, "[redacted:API_TOKEN]") || reflectionLeak(out, secret) != "" {
				t.Errorf("enc %s: %s %q", enc, status, out)
			}
		}
	})
}
