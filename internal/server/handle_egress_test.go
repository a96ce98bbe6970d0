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
