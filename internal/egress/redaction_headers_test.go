package egress

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// TestRedactionEveryHeaderBlock sends a real secret (injected by a rule, or swapped in for a
// placeholder) to upstreams that reflect it in every header block a response has, and checks
// that none of them brings it back into the sandbox: an informational 103 (written by the
// ReverseProxy's trace hook before the final response exists), a field whose name holds the
// secret (HTTP folds names: the sandbox would see it lower-cased), trailers declared and
// undeclared, values and names. Every path: plain HTTP (upgraded upstream), intercepted TLS
// over HTTP/1.1 and HTTP/2 on the sandbox side, each against an h2 and an HTTP/1.1-only
// upstream (1xx lines and chunked trailers parsed by the h1 transport).
func TestRedactionEveryHeaderBlock(t *testing.T) {
	const secret = "Zq7uV2mP9xK4rT1bN8cW3yH6dL"   // injected by the rule
	const phReal = "sk-REAL-key-0123456789abcdef" // stands behind the placeholder
	tok := inject.NewPlaceholder()
	ph := "sk-" + tok
	inj := &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}
	ih, sb := newInterceptHarnessWith(t, map[string]string{"API_TOKEN": secret, "OPENAI": phReal}, policy.Spec{
		Inspect: policy.InspectAll,
		Rules: []policy.Rule{
			{ID: "reflect", Hosts: []string{"reflect.example.test", "reflect1.example.test"}, Action: policy.ActionInject, Inject: inj},
		},
		Placeholders: []policy.Placeholder{{Secret: "OPENAI", Env: "OPENAI_API_KEY", Hosts: []string{"ph.example.test", "ph1.example.test"}, Prefix: "sk-"}},
	}, map[string]string{"OPENAI": tok}, nil)
	ih.net.StartReflector(t, "reflect.example.test")
	ih.net.StartReflectorH1(t, "reflect1.example.test")
	ih.net.SetRecord("ph.example.test", egresstest.ReflectIP)
	ih.net.SetRecord("ph1.example.test", egresstest.ReflectH1IP)

	type cred struct {
		name   string
		value  string   // what the upstream receives and reflects
		marker string   // what the sandbox must see instead
		hosts  []string // h2 upstream, h1-only upstream
		args   []string // extra curl arguments
	}
	creds := []cred{
		{"injected", secret, "[redacted:API_TOKEN]", []string{"reflect.example.test", "reflect1.example.test"}, nil},
		{"placeholder", phReal, ph, []string{"ph.example.test", "ph1.example.test"}, []string{"-H", "Authorization: Bearer " + ph}},
	}
	// leaked reports a run of MinRun(len(v)) characters of v in out, compared without regard
	// to case (a header name arrives case-folded).
	leaked := func(out, v string) string {
		lo, n := strings.ToLower(out), inject.MinRun(len(v))
		for a := 0; a+n <= len(v); a++ {
			if s := strings.ToLower(v[a : a+n]); strings.Contains(lo, s) {
				return s
			}
		}
		return ""
	}
	// The reflected value is the Authorization header minus "Bearer " (a token: it can be a
	// field name too).
	const reflect = "/reflect?h=Authorization&from=7&pre=k%3D"
	cases := []struct {
		name  string
		query string
		info  bool     // the first header block is a 103 reflecting the value
		want  []string // fields (compared lower-cased) the sandbox must see, %s = the marker
	}{
		{"103 reflecting the value", "&info=103", true, []string{"x-reflected: k=%s"}},
		{"103 and final header with a field named after it", "&info=103&name=1", true, []string{"x-reflected: k=%s"}},
		{"final header name", "&name=1", false, []string{"x-reflected: k=%s"}},
		{"declared trailers, value and name", "&name=1&trailer=declared", false, []string{"x-reflected: k=%s", "x-reflected-trailer: k=%s"}},
		{"undeclared trailers, value and name", "&name=1&trailer=undeclared", false, []string{"x-reflected: k=%s", "x-reflected-trailer: k=%s"}},
	}
	legs := []struct {
		name   string
		scheme string
		args   []string
	}{
		{"plain HTTP", "http", []string{"--http1.1"}},
		{"intercepted HTTP/1.1", "https", []string{"--http1.1"}},
		{"intercepted HTTP/2", "https", []string{"--http2"}},
	}
	for _, c := range creds {
		for _, leg := range legs {
			for i, host := range c.hosts {
				upstream := [...]string{"h2 upstream", "h1 upstream"}[i]
				for _, tc := range cases {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", c.name, leg.name, upstream, tc.name), func(t *testing.T) {
						args := append([]string{"--cacert", ih.caFile, "-D", "-"}, leg.args...)
						args = append(append(args, c.args...), leg.scheme+"://"+host+reflect+tc.query)
						out, status, err := curl(sb, args...)
						if err != nil || status != "200" {
							t.Fatalf("%s %v: %q", status, err, out)
						}
						if s := leaked(out, c.value); s != "" {
							t.Fatalf("the sandbox saw %q of the secret: %q", s, out)
						}
						lo := strings.ToLower(out)
						m := strings.ToLower(c.marker)
						if tc.info {
							first, _, _ := strings.Cut(lo, "\r\n\r\n")
							first += "\r\n"
							for _, w := range []string{" 103", "\r\nx-reflected: k=" + m + "\r\n", "\r\nlink: </style.css?v=k=" + m + ">; rel=preload\r\n"} {
								if !strings.Contains(first, w) {
									t.Fatalf("103 block %q lacks %q", first, w)
								}
							}
						}
						for _, w := range tc.want {
							if w = strings.ReplaceAll(w, "%s", m); !strings.Contains(lo, w+"\r\n") {
								t.Fatalf("want %q in %q", w, out)
							}
						}
						if !strings.Contains(out, "k="+c.marker) {
							t.Fatalf("body not redacted to %q: %q", c.marker, out)
						}
					})
				}
			}
		}
	}
}
