package server

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestDecodeSpec(t *testing.T) {
	tests := []struct {
		body    string
		code    errdefs.Code
		pointer string
	}{
		{`{"mode":"allowlist","allow":["a.test"]}`, "", ""},
		{`{`, errdefs.CodeInvalidJSON, ""},
		{`[]`, errdefs.CodeEgressPolicyInvalid, ""},
		{`{"allowed":["a.test"]}`, errdefs.CodeEgressPolicyInvalid, "/allowed"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"deny","inject":{"setHeader":{}}}]}`, errdefs.CodeEgressPolicyInvalid, "/rules/0/inject/setHeader"},
		{`{"rules":[{"id":"a","hosts":["a.test"],"action":"deny","match":{"path":{"regex":"x"}}}]}`, errdefs.CodeEgressPolicyInvalid, "/rules/0/match/path/regex"},
		{`{"ports":"any"}`, errdefs.CodeEgressPolicyInvalid, "/ports"},
		{`{"dns":{"denied":"nxdomain","x/y":1}}`, errdefs.CodeEgressPolicyInvalid, "/dns/x~1y"},
	}
	for _, tt := range tests {
		_, err := decodeSpec([]byte(tt.body))
		if tt.code == "" {
			if err != nil {
				t.Errorf("decodeSpec(%s) = %v", tt.body, err)
			}
			continue
		}
		var e *errdefs.Error
		if !errdefs.IsCode(err, tt.code) {
			t.Errorf("decodeSpec(%s) = %v; want %s", tt.body, err, tt.code)
			continue
		}
		if tt.code == errdefs.CodeEgressPolicyInvalid {
			if !errors.As(err, &e) || e.Context["pointer"] != tt.pointer {
				t.Errorf("decodeSpec(%s) pointer = %v; want %q", tt.body, err, tt.pointer)
			}
		}
	}
}

func TestMergePatch(t *testing.T) {
	// RFC 7386 appendix A, a selection.
	tests := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, tt := range tests {
		var target, patch any
		json.Unmarshal([]byte(tt.target), &target)
		json.Unmarshal([]byte(tt.patch), &patch)
		got, _ := json.Marshal(mergePatch(target, patch))
		if strings.TrimSpace(string(got)) != tt.want {
			t.Errorf("mergePatch(%s, %s) = %s; want %s", tt.target, tt.patch, got, tt.want)
		}
	}
}

// TestCreateEgressStrict: a create request's egress policy is decoded as strictly as PUT's: a
// misspelt field (a deny list, a rule's match) is refused with its pointer, not dropped, since
// a dropped deny list or match would let the sandbox reach what the policy meant to deny.
func TestCreateEgressStrict(t *testing.T) {
	for _, tt := range []struct {
		body    string
		code    errdefs.Code // "" = accepted
		pointer string
		none    bool // no policy
	}{
		{`{"id":"a"}`, "", "", true},
		{`{"id":"a","egress":null}`, "", "", true},
		{`{"id":"a","egress":{"mode":"allowlist","allow":["a.test"],"deny":["b.test"]}}`, "", "", false},
		{`{"id":"a","egress":{"mode":"allow-all","dney":["b.test"]}}`, errdefs.CodeEgressPolicyInvalid, "/egress/dney", false},
		{`{"id":"a","egress":{"rules":[{"id":"r","hosts":["a.test"],"action":"deny","mtach":{"method":["POST"]}}]}}`, errdefs.CodeEgressPolicyInvalid, "/egress/rules/0/mtach", false},
		{`{"id":"a","egress":{"ports":"any"}}`, errdefs.CodeEgressPolicyInvalid, "/egress/ports", false},
		{`{"id":"a","egress":[]}`, errdefs.CodeEgressPolicyInvalid, "/egress", false},
	} {
		spec, err := createEgress([]byte(tt.body))
		if tt.code == "" {
			if err != nil || (spec == nil) != tt.none {
				t.Errorf("createEgress(%s) = %v, %v", tt.body, spec, err)
			}
			if spec != nil && len(spec.Deny) != 1 {
				t.Errorf("createEgress(%s) deny = %v; want the deny list kept", tt.body, spec.Deny)
			}
			continue
		}
		var e *errdefs.Error
		if !errdefs.IsCode(err, tt.code) || !errors.As(err, &e) || e.Context["pointer"] != tt.pointer {
			t.Errorf("createEgress(%s) = %v; want %s at %q", tt.body, err, tt.code, tt.pointer)
		}
	}
}
