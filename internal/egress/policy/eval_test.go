package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pattern string
		host    string
		want    bool
	}{
		{"*", "anything.example", true},
		{"github.com", "github.com", true},
		{"github.com", "api.github.com", false},
		{"*.github.com", "api.github.com", true},
		{"*.github.com", "a.b.github.com", true},
		{"*.github.com", "github.com", false},
		{"*.github.com", "evilgithub.com", false},
		{"*.github.com", "github.com.evil.test", false},
		{"example.com", "evilexample.com", false},
	}
	for _, tt := range tests {
		p, err := ParsePattern(tt.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
		}
		if got := p.Match(tt.host); got != tt.want {
			t.Errorf("%q.Match(%q) = %v; want %v", tt.pattern, tt.host, got, tt.want)
		}
	}
	for _, bad := range []string{"", "*example.com", "foo*.bar", "a.*.b", "*.*.com", "1.2.3.4", "[::1]", "Example.com", "example.com.", "example.com:443", "ex ample.com", "**"} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("ParsePattern(%q) accepted", bad)
		}
	}
}

func TestPatternCovers(t *testing.T) {
	tests := []struct {
		p, q string
		want bool
	}{
		{"*", "*", true},
		{"*", "a.com", true},
		{"a.com", "*", false},
		{"*.a.com", "x.a.com", true},
		{"*.a.com", "*.x.a.com", true},
		{"*.a.com", "*.a.com", true},
		{"*.a.com", "a.com", false},
		{"*.x.a.com", "*.a.com", false},
		{"a.com", "a.com", true},
	}
	for _, tt := range tests {
		p, _ := ParsePattern(tt.p)
		q, _ := ParsePattern(tt.q)
		if got := p.Covers(q); got != tt.want {
			t.Errorf("%q.Covers(%q) = %v; want %v", tt.p, tt.q, got, tt.want)
		}
	}
}

const sample = `{
  "mode": "allowlist",
  "allow": ["api.example.test", "*.pkgs.example.net", "github.com", "plain.example.test"],
  "deny": ["bad.pkgs.example.net"],
  "ports": [2222],
  "rules": [
    {"id": "msgs", "hosts": ["api.example.test"], "match": {"methods": ["POST"], "path": {"prefix": "/v1/messages"}},
     "action": "inject", "inject": {"setHeaders": {"x-api-key": "${secrets.KEY}"}, "removeHeaders": ["authorization"]}},
    {"id": "rest", "hosts": ["api.example.test"], "action": "deny"},
    {"id": "wild", "hosts": ["*.example.test"], "action": "pass"},
    {"id": "git", "hosts": ["github.com"], "action": "inject", "inject": {"basicAuth": {"username": "x-access-token", "password": "${secrets.GH}"}}},
    {"id": "hook", "hosts": ["hooks.internal.test"], "action": "handler", "handler": "ops"}
  ],
  "placeholders": [{"secret": "OPENAI", "hosts": ["*.pkgs.example.net"]}]
}`

func mustCompile(t *testing.T, js string) *Compiled {
	t.Helper()
	var s Spec
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

func TestEvaluate(t *testing.T) {
	c := mustCompile(t, sample)
	tests := []struct {
		kind Kind
		host string
		port int
		want Action
	}{
		{KindDNS, "api.example.test", 0, Allow},
		{KindDNS, "evil.example.test", 0, Deny},
		{KindDNS, "registry.pkgs.example.net", 0, Allow},
		{KindDNS, "pkgs.example.net", 0, Deny},
		{KindDNS, "bad.pkgs.example.net", 0, Deny},
		{KindDNS, "hooks.internal.test", 0, Allow}, // handler hosts are implicitly allowed
		{KindTLS, "api.example.test", 443, Intercept},
		{KindTLS, "registry.pkgs.example.net", 443, Intercept}, // placeholder host
		{KindTLS, "github.com", 443, Intercept},
		{KindTLS, "github.com", 8443, Deny},
		{KindTLS, "plain.example.test", 443, Intercept}, // *.example.test rule
		{KindHTTP, "plain.example.test", 80, Intercept},
		{KindTCP, "api.example.test", 2222, Allow},
		{KindTCP, "api.example.test", 22, Deny},
		{KindTLS, "evil.example.test", 443, Deny},
	}
	for _, tt := range tests {
		d := c.Evaluate(Request{Kind: tt.kind, Host: tt.host, Port: tt.port})
		if d.Action != tt.want {
			t.Errorf("Evaluate(%s %s:%d) = %v (%s); want %v", tt.kind, tt.host, tt.port, d.Action, d.Reason, tt.want)
		}
	}
	var nilC *Compiled
	if d := nilC.Evaluate(Request{Kind: KindTLS, Host: "x.test", Port: 443}); d.Action != Allow {
		t.Errorf("nil Compiled = %v; want Allow", d.Action)
	}
	if d := nilC.Evaluate(Request{Kind: KindTLS, Host: "x.test", Port: 22}); d.Action != Deny {
		t.Errorf("nil Compiled port 22 = %v; want Deny", d.Action)
	}
	all := mustCompile(t, `{"inspect":"all"}`)
	if d := all.Evaluate(Request{Kind: KindTLS, Host: "x.test", Port: 443}); d.Action != Intercept {
		t.Errorf("inspect all = %v", d.Action)
	}
	if d := mustCompile(t, `{"mode":"deny-all"}`).Evaluate(Request{Kind: KindDNS, Host: "x.test"}); d.Action != Deny {
		t.Errorf("deny-all = %v", d.Action)
	}
	if !c.Local("hooks.internal.test") || c.Local("api.example.test") || c.Local("evil.example.test") {
		t.Error("Local wrong")
	}
}

func TestRequest(t *testing.T) {
	c := mustCompile(t, sample)
	tests := []struct {
		host, method, path string
		want               Action
		rule               string
	}{
		{"api.example.test", "POST", "/v1/messages", Allow, "msgs"},
		{"api.example.test", "post", "/v1/messages/batches", Allow, "msgs"},
		{"api.example.test", "GET", "/v1/messages", Deny, "rest"},
		{"api.example.test", "POST", "/v1/models", Deny, "rest"},
		{"api.example.test", "POST", "/x/../v1/messages", Allow, "msgs"},
		{"api.example.test", "POST", "/v1/messages/../../admin", Deny, "rest"},
		{"api.example.test", "POST", "//v1//messages", Allow, "msgs"},
		{"plain.example.test", "GET", "/", Allow, "wild"},
		{"github.com", "GET", "/acme/repo.git/info/refs", Allow, "git"},
		{"registry.pkgs.example.net", "GET", "/", Allow, ""},
		{"evil.example.test", "GET", "/", Deny, ""},
	}
	for _, tt := range tests {
		d := c.Request(tt.host, tt.method, tt.path)
		id := ""
		if d.Rule != nil {
			id = d.Rule.ID
		}
		if d.Action != tt.want || id != tt.rule {
			t.Errorf("Request(%s %s %s) = %v rule %q (%s); want %v rule %q", tt.host, tt.method, tt.path, d.Action, id, d.Reason, tt.want, tt.rule)
		}
	}
	if ph := c.PlaceholdersFor("registry.pkgs.example.net"); len(ph) != 1 || ph[0].Secret != "OPENAI" {
		t.Errorf("PlaceholdersFor = %v", ph)
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	var changes []string
	r.Watch(func(id string, old, new *Compiled) { changes = append(changes, id+":"+new.Mode()) })
	req := Request{SandboxID: "a", Kind: KindDNS, Host: "x.test"}
	if d := r.Decide(t.Context(), req); d.Action != Allow {
		t.Fatalf("default = %v", d.Action)
	}
	r.Set("a", mustCompile(t, `{"mode":"deny-all"}`))
	if d := r.Decide(t.Context(), req); d.Action != Deny {
		t.Fatalf("after Set = %v", d.Action)
	}
	if d := r.Decide(t.Context(), Request{SandboxID: "b", Kind: KindDNS, Host: "x.test"}); d.Action != Allow {
		t.Fatalf("other sandbox = %v", d.Action)
	}
	if SnapshotFor(r, "a").Mode() != ModeDenyAll || SnapshotFor(AllowPublic{}, "a") != nil {
		t.Error("SnapshotFor wrong")
	}
	r.Delete("a")
	if d := r.Decide(t.Context(), req); d.Action != Allow {
		t.Fatalf("after Delete = %v", d.Action)
	}
	if strings.Join(changes, ",") != "a:deny-all,a:allow-all" {
		t.Errorf("watch saw %v", changes)
	}
}

func TestValidate(t *testing.T) {
	secrets := map[string]bool{"KEY": true, "GH": true, "OPENAI": true}
	l := Lookups{Secret: func(n string) bool { return secrets[n] }, Handler: func(n string) bool { return n == "ops" }, Upstream: func(n string) bool { return n == "internal" }}
	var good Spec
	if err := json.Unmarshal([]byte(sample), &good); err != nil {
		t.Fatal(err)
	}
	if err := Validate(good, l); err != nil {
		t.Fatalf("Validate(sample): %v", err)
	}
	tests := []struct {
		js      string
		pointer string
	}{
		{`{"mode":"open"}`, "/mode"},
		{`{"allow":["ok.test","*evil.com"]}`, "/allow/1"},
		{`{"deny":["10.0.0.1"]}`, "/deny/0"},
		{`{"ports":[0]}`, "/ports/0"},
		{`{"ports":[22,22]}`, "/ports/1"},
		{`{"inspect":"some"}`, "/inspect"},
		{`{"inspect":"none","rules":[{"id":"a","hosts":["a.test"],"action":"deny"}]}`, "/rules"},
		{`{"dns":{"denied":"explain"}}`, "/dns/denied"},
		{`{"rules":[{"id":"A","hosts":["a.test"],"action":"deny"}]}`, "/rules/0/id"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"deny"},{"id":"a","hosts":["a.test"],"action":"deny"}]}`, "/rules/1/id"},
		{`{"rules":[{"id":"a","hosts":[],"action":"deny"}]}`, "/rules/0/hosts"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"allow"}]}`, "/rules/0/action"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"inject"}]}`, "/rules/0/inject"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"inject","inject":{"setHeaders":{"x":"${secrets.NOPE}"}}}]}`, "/rules/0/inject/setHeaders/x"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"inject","inject":{"setHeaders":{"x":"${env.HOME}"}}}]}`, "/rules/0/inject/setHeaders/x"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"inject","inject":{"setHeaders":{"host":"x"}}}]}`, "/rules/0/inject/setHeaders/host"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"inject","inject":{"setHeaders":{"Hutch-Sandbox":"x"}}}]}`, "/rules/0/inject/setHeaders/Hutch-Sandbox"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"inject","inject":{"basicAuth":{"username":"a:b","password":"x"}}}]}`, "/rules/0/inject/basicAuth/username"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"handler","handler":"nope"}]}`, "/rules/0/handler"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"pass","upstream":"nope"}]}`, "/rules/0/upstream"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"deny","upstream":"internal"}]}`, "/rules/0/upstream"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"deny","match":{"methods":["get"]}}]}`, "/rules/0/match/methods/0"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"deny","match":{"path":{"prefix":"/a/../b"}}}]}`, "/rules/0/match/path/prefix"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"deny","match":{"path":{"exact":"/a","prefix":"/b"}}}]}`, "/rules/0/match/path"},
		{`{"placeholders":[{"secret":"NOPE","hosts":["a.test"]}]}`, "/placeholders/0/secret"},
		{`{"placeholders":[{"secret":"KEY","env":"1X","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"mode":"allowlist","allow":["a.test"],"placeholders":[{"secret":"KEY","hosts":["b.test"]}]}`, "/placeholders/0/hosts/0"},
		{`{"mode":"allowlist","allow":["*.a.test"],"placeholders":[{"secret":"KEY","hosts":["a.test"]}]}`, "/placeholders/0/hosts/0"},
		{`{"placeholders":[{"secret":"KEY","hosts":["a.test"],"in":["cookie"]}]}`, "/placeholders/0/in/0"},
		{`{"placeholders":[{"secret":"KEY","hosts":["a.test"],"onViolation":"ignore"}]}`, "/placeholders/0/onViolation"},
		{`{"placeholders":[{"secret":"KEY","hosts":["a.test"]},{"secret":"GH","env":"KEY","hosts":["a.test"]}]}`, "/placeholders/1/env"},
	}
	for _, tt := range tests {
		var s Spec
		if err := json.Unmarshal([]byte(tt.js), &s); err != nil {
			t.Fatalf("%s: %v", tt.js, err)
		}
		err := Validate(s, l)
		var e *errdefs.Error
		if !errdefs.IsCode(err, errdefs.CodeEgressPolicyInvalid) || !asErr(err, &e) || e.Context["pointer"] != tt.pointer {
			t.Errorf("Validate(%s) = %v; want EGRESS_POLICY_INVALID at %s", tt.js, err, tt.pointer)
		}
	}
	if got := SecretNames(good); strings.Join(got, ",") != "GH,KEY,OPENAI" {
		t.Errorf("SecretNames = %v", got)
	}
}

func asErr(err error, e **errdefs.Error) bool {
	return errors.As(err, e)
}

func TestExpand(t *testing.T) {
	got, err := Expand("Bearer ${secrets.A}-${secrets.B}", func(n string) (string, error) { return strings.ToLower(n) + "v", nil })
	if err != nil || got != "Bearer av-bv" {
		t.Errorf("Expand = %q, %v", got, err)
	}
	for _, bad := range []string{"${secrets.}", "${x}", "${secrets.A", "a\nb"} {
		if _, err := TemplateSecrets(bad); err == nil {
			t.Errorf("TemplateSecrets(%q) accepted", bad)
		}
	}
}

// FuzzCanonical checks that canonicalisation is idempotent and that accepted hosts and paths
// never carry what a matcher could be fooled by.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"Example.COM.", "a..b", "/a/../b", "//x/./y/", "%2e%2e", "xn--bcher-kva.example:443", "*.a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if h, err := CanonicalHost(s); err == nil {
			if h2, err := CanonicalHost(h); err != nil || h2 != h {
				t.Errorf("CanonicalHost not idempotent: %q → %q → %q, %v", s, h, h2, err)
			}
			if strings.ContainsAny(h, "*/:%\x00 ") || strings.ToLower(h) != h {
				t.Errorf("CanonicalHost(%q) = %q", s, h)
			}
		}
		p := CanonicalPath(s)
		if CanonicalPath(p) != p || !strings.HasPrefix(p, "/") || strings.Contains(p, "/../") || strings.Contains(p, "//") || strings.HasSuffix(p, "/..") {
			t.Errorf("CanonicalPath(%q) = %q", s, p)
		}
		if pt, err := ParsePattern(s); err == nil {
			if pt.String() != s {
				t.Errorf("pattern %q printed as %q", s, pt)
			}
			if h, err := CanonicalHost(strings.TrimPrefix(s, "*.")); err != nil || (s != "*" && h != strings.TrimPrefix(s, "*.")) {
				if s != "*" {
					t.Errorf("pattern %q accepted but its name is not canonical", s)
				}
			}
		}
	})
}
