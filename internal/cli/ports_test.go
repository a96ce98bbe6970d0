package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPortCommands(t *testing.T) {
	f, url := newProcFake(t)
	r := run(t, url, "", "expose", "box", "3000", "--name", "web")
	body, _ := f.last()
	if r.code != 0 || r.stdout != "http://3000-box-abcdefgh12345678.hutch.localhost:8080/\n" || r.stderr != "" {
		t.Errorf("expose = %+v", r)
	}
	if body["port"] != 3000.0 || body["name"] != "web" || body["token"] != nil {
		t.Errorf("expose body = %v", body)
	}
	r = run(t, url, "", "expose", "box", "8080", "--token", "mytok", "--json")
	var p map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p["token"] != "mytok" || p["port"] != 8080.0 ||
		p["url"] != "http://8080-box-mytok.hutch.localhost:8080/" {
		t.Errorf("expose --json = %q (%v)", r.stdout, err)
	}

	r = run(t, url, "", "ports", "box")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "PORT") ||
		!strings.Contains(r.stdout, "http://3000-box-abcdefgh12345678.hutch.localhost:8080/") {
		t.Errorf("ports = %+v", r)
	}
	r = run(t, url, "", "ports", "box", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 {
		t.Errorf("ports --json = %q (%v)", r.stdout, err)
	}

	if r = run(t, url, "", "unexpose", "box", "3000"); r.code != 0 || r.stdout != "3000 unexposed\n" {
		t.Errorf("unexpose = %+v", r)
	}
	failures := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"unexpose", "box", "3000"}, ExitError, "(PORT_NOT_EXPOSED)"},
		{[]string{"expose", "box", "80"}, ExitError, "(INVALID_PORT)"},
		{[]string{"expose", "box", "http"}, ExitUsage, "want a number"},
		{[]string{"unexpose", "box", "0"}, ExitUsage, "want a number"},
		{[]string{"expose", "box"}, ExitUsage, "want 2 argument(s)"},
		{[]string{"ports"}, ExitUsage, "want 1 argument(s)"},
	}
	for _, tt := range failures {
		if r := run(t, url, "", tt.args...); r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantErr) {
			t.Errorf("hutch %q = %+v; want code %d and %q", tt.args, r, tt.wantCode, tt.wantErr)
		}
	}
	if r = run(t, url, "", "unexpose", "box", "8080"); r.code != 0 {
		t.Fatal(r)
	}
	if r = run(t, url, "", "ports", "box", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ports --json with none = %q; want []", r.stdout)
	}
}
