package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

// TestValidateRefusesDangerousBindings is issue 7 finding 5: placeholders may not take an env
// name the sandbox depends on, and neither placeholders nor rules that inject a secret may
// name every host ("*") or a whole top-level domain ("*.com"); values echoed in errors are cut
// to MaxEcho bytes.
func TestValidateRefusesDangerousBindings(t *testing.T) {
	l := Lookups{Secret: func(n string) bool { return n == "KEY" }}
	for _, tt := range []struct {
		js, pointer string
	}{
		{`{"placeholders":[{"secret":"KEY","env":"PATH","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"placeholders":[{"secret":"KEY","env":"LD_PRELOAD","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"placeholders":[{"secret":"KEY","env":"HOME","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"placeholders":[{"secret":"KEY","env":"HUTCH_SANDBOX_ID","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"placeholders":[{"secret":"KEY","env":"SSL_CERT_FILE","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"placeholders":[{"secret":"KEY","env":"NODE_OPTIONS","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"placeholders":[{"secret":"KEY","env":"PYTHONPATH","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"placeholders":[{"secret":"KEY","env":"LC_ALL","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"placeholders":[{"secret":"KEY","env":"https_proxy","hosts":["a.test"]}]}`, "/placeholders/0/env"},
		{`{"placeholders":[{"secret":"KEY","hosts":["*"]}]}`, "/placeholders/0/hosts/0"},
		{`{"placeholders":[{"secret":"KEY","hosts":["a.test","*.com"]}]}`, "/placeholders/0/hosts/1"},
		{`{"rules":[{"id":"a","hosts":["*"],"action":"inject","inject":{"setHeaders":{"Authorization":"Bearer ${secrets.KEY}"}}}]}`, "/rules/0/hosts/0"},
		{`{"rules":[{"id":"a","hosts":["*.io"],"action":"inject","inject":{"basicAuth":{"username":"u","password":"${secrets.KEY}"}}}]}`, "/rules/0/hosts/0"},
	} {
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
	// Still fine: named hosts and wildcards under a registrable name, "*" for rules that
	// carry no secret, ordinary env names.
	for _, js := range []string{
		`{"placeholders":[{"secret":"KEY","env":"OPENAI_API_KEY","hosts":["api.openai.com","*.example.com"]}]}`,
		`{"placeholders":[{"secret":"KEY","env":"MY_PATH_TOKEN","hosts":["a.test"]}]}`,
		`{"rules":[{"id":"a","hosts":["*"],"action":"deny","match":{"methods":["DELETE"]}},{"id":"b","hosts":["*"],"action":"inject","inject":{"setHeaders":{"X-Trace":"1"}}}]}`,
	} {
		var s Spec
		if err := json.Unmarshal([]byte(js), &s); err != nil {
			t.Fatal(err)
		}
		if err := Validate(s, l); err != nil {
			t.Errorf("Validate(%s) = %v", js, err)
		}
	}
	// Long values are not echoed back whole.
	long := strings.Repeat("a", 5000)
	for _, js := range []string{
		`{"allow":["` + long + `.test"]}`,
		`{"rules":[{"id":"` + long + `","hosts":["a.test"],"action":"deny"}]}`,
		`{"rules":[{"id":"a","hosts":["a.test"],"action":"deny","match":{"path":{"prefix":"x` + long + `"}}}]}`,
		`{"rules":[{"id":"a","hosts":["a.test"],"action":"inject","inject":{"setHeaders":{"X":"${` + long + `"}}}]}`,
		`{"mode":"` + long + `"}`,
	} {
		var s Spec
		if err := json.Unmarshal([]byte(js), &s); err != nil {
			t.Fatal(err)
		}
		err := Validate(s, l)
		if err == nil || len(err.Error()) > 2*MaxEcho+200 {
			t.Errorf("error for a %d-byte value is %d bytes long", len(js), len(errString(err)))
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
