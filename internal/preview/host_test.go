package preview

import (
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		host, domain string
		want         Target
		ok           bool
	}{
		{"8080-sb1-abc123.localhost", "localhost", Target{8080, "sb1", "abc123"}, true},
		{"8080-sb1-abc123.localhost:7412", "localhost", Target{8080, "sb1", "abc123"}, true},
		{"8080-SB1-ABC_123.LocalHost:7412", "localhost", Target{8080, "sb1", "abc_123"}, true},
		{"8080-sb1-abc123.preview.example.com", "preview.example.com", Target{8080, "sb1", "abc123"}, true},
		{"8080-sb1-abc123.preview.example.com.", "Preview.Example.com", Target{8080, "sb1", "abc123"}, true},
		{"65535-my-long-sandbox-id-t.localhost", "localhost", Target{65535, "my-long-sandbox-id", "t"}, true},
		{"1024-a-b-c-0123456789abcdef.localhost", "localhost", Target{1024, "a-b-c", "0123456789abcdef"}, true},
		{"3000-x-_.localhost", "localhost", Target{3000, "x", "_"}, true},

		{"localhost", "localhost", Target{}, false},
		{"localhost:7412", "localhost", Target{}, false},
		{"", "localhost", Target{}, false},
		{"8080-sb1-abc.example.com", "localhost", Target{}, false},             // other domain
		{"8080-sb1-abc.notlocalhost", "localhost", Target{}, false},            // suffix without dot
		{"x.8080-sb1-abc.localhost", "localhost", Target{}, false},             // extra label
		{"8080-sb1.localhost", "localhost", Target{}, false},                   // no token
		{"8080--abc.localhost", "localhost", Target{}, false},                  // empty id
		{"8080-sb1-.localhost", "localhost", Target{}, false},                  // empty token
		{"-sb1-abc.localhost", "localhost", Target{}, false},                   // empty port
		{"80-sb1-abc.localhost", "localhost", Target{}, false},                 // port 2 digits
		{"808-sb1-abc.localhost", "localhost", Target{}, false},                // port 3 digits
		{"123456-sb1-abc.localhost", "localhost", Target{}, false},             // port 6 digits
		{"70000-sb1-abc.localhost", "localhost", Target{}, false},              // port > 65535
		{"01024-sb1-abc.localhost", "localhost", Target{}, false},              // leading zero
		{"1000-sb1-abc.localhost", "localhost", Target{}, false},               // below 1024
		{"8o80-sb1-abc.localhost", "localhost", Target{}, false},               // not digits
		{"8080-sb1-abc.def.localhost", "localhost", Target{}, false},           // dot in token
		{"8080-sb1-0123456789abcdefg.localhost", "localhost", Target{}, false}, // token 17
		{"8080-sb1-ab+c.localhost", "localhost", Target{}, false},              // bad token char
		{"8080-sb_1-abc.localhost", "localhost", Target{}, false},              // bad id char
		{"8080-www-abc.localhost", "localhost", Target{}, false},               // reserved id
		{"8080-" + strings.Repeat("a", 64) + "-abc.localhost", "localhost", Target{}, false},
		{"8080-sb1-abc.localhost", "", Target{}, false},
		{"[::1]:7412", "localhost", Target{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseHost(tt.host, tt.domain)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseHost(%q, %q) = %+v, %v; want %+v, %v", tt.host, tt.domain, got, ok, tt.want, tt.ok)
		}
	}
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := NewToken()
		if len(tok) != 16 || !ValidToken(tok) {
			t.Fatalf("NewToken() = %q; want 16 of [a-z0-9_]", tok)
		}
		if seen[tok] {
			t.Fatalf("NewToken repeated %q", tok)
		}
		seen[tok] = true
	}
}

func TestValidateToken(t *testing.T) {
	for _, tok := range []string{"abcdefgh", "________", "0123456789abcdef", "my_token_1"} {
		if err := ValidateToken(tok); err != nil {
			t.Errorf("ValidateToken(%q) = %v", tok, err)
		}
	}
	for _, tok := range []string{"", "a", "abcdefg", "0123456789abcdefg", "ABCDEFGHI", "abcd-efgh", "abcd.efgh", "abcd efgh", "ééééé"} {
		if err := ValidateToken(tok); !errdefs.IsCode(err, errdefs.CodeBadPortToken) {
			t.Errorf("ValidateToken(%q) = %v; want INVALID_PORT_TOKEN", tok, err)
		}
	}
}

func TestURL(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Domain: "localhost", PublicPort: 7412}, "http://8080-sb1-tok.localhost:7412/"},
		{Config{Domain: "localhost", PublicPort: 80}, "http://8080-sb1-tok.localhost/"},
		{Config{Domain: "localhost"}, "http://8080-sb1-tok.localhost/"},
		{Config{Domain: "localhost", PublicPort: 443}, "http://8080-sb1-tok.localhost:443/"},
		{Config{Domain: "p.example.com", TLS: true, PublicPort: 443}, "https://8080-sb1-tok.p.example.com/"},
		{Config{Domain: "p.example.com", TLS: true, PublicPort: 80}, "https://8080-sb1-tok.p.example.com:80/"},
		{Config{Domain: "p.example.com", TLS: true, PublicPort: 8443}, "https://8080-sb1-tok.p.example.com:8443/"},
	}
	for _, tt := range tests {
		got := tt.cfg.URL("sb1", 8080, "tok")
		if got != tt.want {
			t.Errorf("%+v.URL = %q; want %q", tt.cfg, got, tt.want)
		}
		// Every URL built parses back.
		host := strings.TrimSuffix(strings.SplitN(got, "://", 2)[1], "/")
		if tg, ok := ParseHost(host, tt.cfg.Domain); !ok || tg != (Target{8080, "sb1", "tok"}) {
			t.Errorf("ParseHost(%q) = %+v, %v", host, tg, ok)
		}
	}
}

func TestValidatePort(t *testing.T) {
	cfg := Config{ReservedPorts: []int{7412}}
	for _, p := range []int{1024, 3000, 8080, 65535} {
		if err := cfg.ValidatePort(p); err != nil {
			t.Errorf("ValidatePort(%d) = %v", p, err)
		}
	}
	for _, p := range []int{-1, 0, 22, 80, 1023, 65536, 70000, 7412} {
		err := cfg.ValidatePort(p)
		if !errdefs.IsCode(err, errdefs.CodeInvalidPort) {
			t.Errorf("ValidatePort(%d) = %v; want INVALID_PORT", p, err)
			continue
		}
		if ctx := errdefs.ToEnvelope(err, "").Context; ctx["port"] != p {
			t.Errorf("ValidatePort(%d) context = %v; want port %d", p, ctx, p)
		}
	}
}
