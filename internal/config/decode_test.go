package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

// loadFile loads a config file of content text, with no flags or variables.
func loadFile(t *testing.T, text string, args ...string) (Config, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "hutchd.json")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(append([]string{"--config", file}, args...), env(nil))
}

// TestConfigFileStrict: the file is one JSON object whose keys are spelt exactly, each given
// once, with nothing after it; an error names the key path (or line and column) at fault,
// and is VALIDATION_FAILED.
func TestConfigFileStrict(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"stray brace", "{\"listen\": \"127.0.0.1:1\"}\n}", `line 2, column 1: "}" after the top-level object`},
		{"stray bracket", `{"listen": "127.0.0.1:1"}]`, `line 1, column 26: "]" after the top-level object`},
		{"not an object", `["listen"]`, "one JSON object"},
		{"empty", "  \n", "no JSON object"},
		{"syntax", "{\n  \"listen\": \"127.0.0.1:1\",\n}", "line 3, column 1"},
		{"miscased key", `{"StateDir": "/srv/hutch"}`, `StateDir: unknown key; keys are case-sensitive: did you mean "stateDir"?`},
		{"miscased nested key", `{"egressHandlers": {"h1": {"URL": "https://h.example", "signingSecret": "S"}}}`, `egressHandlers["h1"].URL: unknown key; keys are case-sensitive: did you mean "url"?`},
		{"unknown nested key", `{"egressHandlers": {"h1": {"url": "https://h.example", "secret": "S"}}}`, `egressHandlers["h1"].secret: unknown key`},
		{"key twice", `{"listen": "127.0.0.1:1", "listen": "127.0.0.1:2"}`, "listen: key given twice"},
		{"wrong type nested", `{"egressHandlers": {"h1": {"url": "https://h.example", "signingSecret": 5}}}`, `egressHandlers["h1"].signingSecret: want a string, got a number`},
		{"wrong type in list", `{"denyRanges": ["10.0.0.0/8", 7]}`, "denyRanges[1]: want a string, got a number"},
		{"not a list", `{"denyRanges": "10.0.0.0/8"}`, "denyRanges: want a list, got a string"},
		{"not an integer", `{"dnsPort": 53.5}`, "dnsPort: want an integer, got a number"},
		{"bad duration", `{"stopGrace": "5 sec"}`, "stopGrace: "},
		{"bad switch", `{"userns": "maybe"}`, "userns: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFile(t, tc.file)
			if !errdefsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load(%s) = %v; want VALIDATION_FAILED saying %q", tc.file, err, tc.want)
			}
		})
	}
	// What the file may say stays as it was: white space after the object, null for any
	// setting, lists and maps given empty.
	for _, text := range []string{"{}", "{}\n\n", " null ", `{"stopGrace": null, "upstreams": {}, "denyRanges": [], "egressHandlers": null}`} {
		if _, err := loadFile(t, text); err != nil {
			t.Errorf("Load(%q) = %v", text, err)
		}
	}
}

// TestConfigFileNullKeepsDefault: null for a list setting is "not set": extraCACerts: null
// keeps the host's CAs (it used to empty the list); [] empties it.
func TestConfigFileNullKeepsDefault(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "corp.crt")
	if err := os.WriteFile(ca, []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := localCAs
	localCAs = filepath.Join(dir, "*.crt")
	t.Cleanup(func() { localCAs = old })
	for _, tc := range []struct {
		file string
		want []string
	}{
		{`{}`, []string{ca}},
		{`{"extraCACerts": null}`, []string{ca}},
		{`{"extraCACerts": []}`, []string{}},
		{`{"extraCACerts": ["/etc/other.pem"]}`, []string{"/etc/other.pem"}},
	} {
		c, err := loadFile(t, tc.file)
		if err != nil || !slices.Equal(c.ExtraCACerts, tc.want) {
			t.Errorf("Load(%s): ExtraCACerts %q, %v; want %q", tc.file, c.ExtraCACerts, err, tc.want)
		}
	}
}

// TestUpstreamNames: names that differ only in case are refused, naming both, the same way
// every time; names outside the host name grammar are refused from the file and the flag.
func TestUpstreamNames(t *testing.T) {
	const dup = `{"upstreams": {"git.internal": "127.0.0.1:81", "Git.Internal": "127.0.0.1:80", "npm.internal": "127.0.0.1:82"}}`
	file := filepath.Join(t.TempDir(), "hutchd.json")
	if err := os.WriteFile(file, []byte(dup), 0o600); err != nil {
		t.Fatal(err)
	}
	var first string
	for range 20 {
		_, err := Load([]string{"--config", file}, env(nil))
		if !errdefsInvalid(err) || !strings.Contains(err.Error(), `upstreams "Git.Internal" and "git.internal" name the same host "git.internal"`) {
			t.Fatalf("Load(%s) = %v; want VALIDATION_FAILED naming both", dup, err)
		}
		if first == "" {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("error %q, then %q; want the same each time", first, err)
		}
	}
	for _, name := range []string{"a b", "", "-git.internal", "git-.internal", "git..internal", "git.internal.", "10.0.0.1", "git/internal", "gît.internal", strings.Repeat("a", 64)} {
		if _, err := loadFile(t, `{"upstreams": {"`+name+`": "127.0.0.1:80"}}`); !errdefsInvalid(err) || !strings.Contains(err.Error(), "want a host name") {
			t.Errorf("file upstream %q: %v; want VALIDATION_FAILED for its name", name, err)
		}
		if _, err := Load([]string{"--upstream", name + "=127.0.0.1:80"}, env(nil)); !errdefsInvalid(err) || !strings.Contains(err.Error(), "want a host name") {
			t.Errorf("--upstream %q: %v; want VALIDATION_FAILED for its name", name, err)
		}
	}
	for _, name := range []string{"git.internal", "Git.Internal", "gitserver", "my_service.corp", "a-1.b-2.example", strings.Repeat("a", 63) + ".x"} {
		c, err := loadFile(t, `{"upstreams": {"`+name+`": "127.0.0.1:80"}}`)
		if err != nil || c.Upstreams[strings.ToLower(name)] != "127.0.0.1:80" {
			t.Errorf("upstream %q: %v, %v", name, c.Upstreams, err)
		}
	}
}

// TestDecodeTextValue: a struct type read from a JSON string (encoding.TextUnmarshaler, as
// netip.Prefix) is decoded as encoding/json does, not walked as an object.
func TestDecodeTextValue(t *testing.T) {
	var v struct {
		P netip.Prefix `json:"p"`
	}
	if err := decodeValue("", []byte(`{"p": "10.0.0.0/8"}`), reflect.ValueOf(&v).Elem()); err != nil || v.P.String() != "10.0.0.0/8" {
		t.Fatalf("decode: %v, %v", v.P, err)
	}
	if err := decodeValue("", []byte(`{"p": 5}`), reflect.ValueOf(&v).Elem()); err == nil || !strings.Contains(err.Error(), "p: want a string, got a number") {
		t.Fatalf("decode 5: %v; want an error naming p", err)
	}
}

// TestConfigErrorsHideValues: a type error names the setting and the kind of value it got,
// never the value, which may be a credential.
func TestConfigErrorsHideValues(t *testing.T) {
	for _, file := range []string{
		`{"s3SecretKey": ["wJalrXUtnFEMIK7MDENG"]}`,
		`{"s3AccessKey": {"k": "wJalrXUtnFEMIK7MDENG"}}`,
		`{"egressHandlers": {"h1": {"url": "https://h.example", "signingSecret": ["wJalrXUtnFEMIK7MDENG"]}}}`,
	} {
		_, err := loadFile(t, file)
		if err == nil || strings.Contains(err.Error(), "wJalrXUtnFEMIK7MDENG") {
			t.Errorf("Load(%s) = %v; want an error without the value", file, err)
		}
	}
}

// TestUpstreamNameTricks: names that fold or resolve to something else are refused, from the
// file and from the flags alike.
func TestUpstreamNameTricks(t *testing.T) {
	for _, tc := range []struct{ name string }{
		{"\u212a8s.internal"}, // Kelvin sign: strings.ToLower makes it "k8s.internal"
		{"127.1"}, {"2130706433"}, {"0x7f000001"}, {"10.1.1"}, {"git.0x1F"},
	} {
		if _, err := Load([]string{"--upstream", tc.name + "=127.0.0.1:80"}, env(nil)); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
			t.Errorf("--upstream %q: %v; want VALIDATION_FAILED", tc.name, err)
		}
	}
	for _, ok := range []string{"git.internal", "api.v2.example", "x1.example", "0x.example"} {
		if _, err := Load([]string{"--upstream", ok + "=127.0.0.1:80"}, env(nil)); err != nil {
			t.Errorf("--upstream %q: %v; want it accepted", ok, err)
		}
	}
	_, err := Load([]string{"--upstream", "Git.internal=127.0.0.1:80", "--upstream", "git.internal=127.0.0.1:81"}, env(nil))
	if !errdefs.IsCode(err, errdefs.CodeInvalidArgument) || !strings.Contains(err.Error(), "same host") {
		t.Errorf("two flags naming one upstream: %v; want VALIDATION_FAILED naming both", err)
	}
}
