package cli

import (
	"strings"
	"testing"
	"time"
)

func TestParseHandle(t *testing.T) {
	const id = "0f8fad5b-d9cb-469f-a165-70867728950e"
	for _, c := range []struct {
		arg, stdin, want string
		bad              bool
	}{
		{arg: id, want: id},
		{arg: `{"id":"` + id + `","dir":"/workspace"}`, want: id},
		{arg: "-", stdin: "{\n  \"id\": \"" + id + "\",\n  \"dir\": \"/app\"\n}\n", want: id},
		{arg: `{"dir":"/workspace"}`, bad: true},
		{arg: `{not json`, bad: true},
	} {
		got, err := parseHandle(c.arg, strings.NewReader(c.stdin))
		if c.bad != (err != nil) || (!c.bad && got != c.want) {
			t.Errorf("parseHandle(%q) = %q, %v", c.arg, got, err)
		}
	}
}

func TestParseTTL(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "60": time.Minute, "1.5": 1500 * time.Millisecond, "72h": 72 * time.Hour} {
		if got, err := parseTTL(in); err != nil || got != want {
			t.Errorf("parseTTL(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseTTL("3 days"); err == nil {
		t.Error("parseTTL(3 days) succeeded")
	}
	if got := humanBytes(1536); got != "1.5 KiB" {
		t.Errorf("humanBytes(1536) = %q", got)
	}
}
