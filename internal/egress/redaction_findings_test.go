package egress

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// TestRedactionFindings covers the credential-path findings of issue 7's breaker run against
// a reflecting upstream (egresstest.StartReflector) the injected secret goes to:
//  1. a response Content-Encoding other than the gzip the transport undoes is decoded (gzip,
//     deflate) or refused with 502 EGRESS_RESPONSE_UNREDACTABLE (br, zstd, nested), never
//     handed over unscanned;
//  2. partial reflections (25 of 26 characters, prefix and suffix in two responses, a
//     truncated token inside an error message) are redacted in headers and body;
//  3. base64 of the token at a shifted alignment (base64("Bearer "+tok), base64("x"+tok)) is
//     redacted;
//  4. audit events carry no placeholder (http and violation events' path and host).
func TestRedactionFindings(t *testing.T) {
	alog, err := audit.New(t.TempDir(), 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer alog.Close()
	const secret = "Zq7uV2mP9xK4rT1bN8cW3yH6dL" // 26 characters
	tok := inject.NewPlaceholder()
	ih, sb := newInterceptHarnessWith(t, map[string]string{"API_TOKEN": secret, "OPENAI": "sk-REAL-key-0123456789abcdef"}, policy.Spec{
		Inspect: policy.InspectAll,
		Rules: []policy.Rule{{ID: "reflect", Hosts: []string{"reflect.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"X-Api-Key": "${secrets.API_TOKEN}"}}}},
		Placeholders: []policy.Placeholder{{Secret: "OPENAI", Env: "OPENAI_API_KEY", Hosts: []string{"reflect.example.test"}, Prefix: "sk-"}},
	}, map[string]string{"OPENAI": tok}, alog)
	ih.net.StartReflector(t, "reflect.example.test")
	get := func(t *testing.T, query string, extra ...string) (string, string) {
		t.Helper()
		args := append([]string{"--cacert", ih.caFile, "-D", "-"}, extra...)
		out, status, _ := curl(sb, append(args, "https://reflect.example.test/reflect?h=X-Api-Key&"+query)...)
		return out, status
	}
	// leaked reports a run of 9 (MinRun(26)) characters of the secret in out.
	leaked := func(out string) string {
		for a := 0; a+inject.MinRun(len(secret)) <= len(secret); a++ {
			if s := secret[a : a+inject.MinRun(len(secret))]; strings.Contains(out, s) {
				return s
			}
		}
		return ""
	}

	t.Run("finding 1: content encodings", func(t *testing.T) {
		for _, tc := range []struct {
			enc    string
			status string
		}{
			{"", "200"},
			{"gzip", "200"},
			{"deflate", "200"},
			{"rawdeflate", "200"},
			{"br", "502"},
			{"zstd", "502"},
			{"gzip-gzip", "502"},
			{"gzip-in-gzip", "cut"},
		} {
			for _, h2 := range []string{"--http1.1", "--http2"} {
				out, status := get(t, "pre=key%3D&enc="+tc.enc, h2)
				if strings.Contains(out, secret) || leaked(out) != "" {
					t.Errorf("enc %q %s: the sandbox saw the secret: %q", tc.enc, h2, out)
				}
				switch tc.status {
				case "200":
					if status != "200" || !strings.Contains(out, "key=[redacted:API_TOKEN]") || strings.Contains(strings.ToLower(out), "content-encoding") {
						t.Errorf("enc %q %s: want a decoded, redacted 200: %s %q", tc.enc, h2, status, out)
					}
				case "502":
					if status != "502" || !strings.Contains(out, string(errdefs.CodeEgressUnredactable)) || !strings.Contains(out, "cannot be redacted") {
						t.Errorf("enc %q %s: want 502 %s: %s %q", tc.enc, h2, errdefs.CodeEgressUnredactable, status, out)
					}
				case "cut":
					// Headers went out before the nested layer showed: the body is cut off, and
					// no byte of the inner gzip member reaches the sandbox.
					if strings.Contains(out, "\x1f\x8b") {
						t.Errorf("enc %q %s: inner gzip member delivered: %s %q", tc.enc, h2, status, out)
					}
				}
			}
		}
	})

	t.Run("finding 2: partial reflections", func(t *testing.T) {
		for _, q := range []string{
			"to=25",            // the first 25 of 26 characters
			"from=1",           // the last 25
			"to=13", "from=13", // prefix then suffix, in two responses
			"from=4&to=18&pre=" + url.QueryEscape(`{"error":"invalid key `) + "&post=" + url.QueryEscape(`..., see docs"}`), // truncated inside an error message
			"to=25&enc=gzip",
		} {
			out, status := get(t, q)
			if status != "200" || leaked(out) != "" || !strings.Contains(out, "[redacted:API_TOKEN]") {
				t.Errorf("%s: %s, leaked %q: %q", q, status, leaked(out), out)
			}
			// Header (X-Reflected) and body both redacted.
			if strings.Count(out, "[redacted:API_TOKEN]") < 2 {
				t.Errorf("%s: header or body not redacted: %q", q, out)
			}
		}
	})

	t.Run("finding 3: base64 at shifted alignments", func(t *testing.T) {
		for _, pre := range []string{"", "x", "xy", "Bearer "} {
			out, status := get(t, "enc=base64&pre="+url.QueryEscape(pre)+"&post=%21")
			enc := base64.StdEncoding.EncodeToString([]byte(pre + secret + "!"))
			body := out[strings.LastIndex(out, "\r\n\r\n")+4:]
			if status != "200" || body == enc || !strings.Contains(body, "[redacted:API_TOKEN]") {
				t.Errorf("base64(%q+secret): %s %q (unredacted %q)", pre, status, body, enc)
			}
		}
	})

	t.Run("finding 4: no placeholder in audit events", func(t *testing.T) {
		ph := "sk-" + tok
		// Towards the bound host, the placeholder in the path (out of scope: sent as is).
		if _, status, _ := curl(sb, "--cacert", ih.caFile, "https://reflect.example.test/p/"+ph); status != "404" {
			t.Errorf("bound host: %s", status)
		}
		// Towards another host: a violation.
		if _, status, _ := curl(sb, "--cacert", ih.caFile, "https://evil.example.test/p/"+ph); status != "403" {
			t.Errorf("other host: %s", status)
		}
		alog.Flush()
		evs, err := alog.Read("sbx", 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		masked := 0
		for _, e := range evs {
			b, _ := json.Marshal(e)
			if strings.Contains(string(b), tok) || strings.Contains(string(b), secret) {
				t.Errorf("audit event holds a placeholder or secret: %s", b)
			}
			if strings.Contains(e.Path, inject.MaskedPlaceholder) {
				masked++
			}
		}
		if masked < 3 { // http (bound host), violation + http (other host)
			t.Errorf("%d events with a masked path, want 3", masked)
		}
	})
}
