package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

func envOf(m map[string]string) Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDiscover(t *testing.T) {
	full := t.TempDir()
	writeFile(t, filepath.Join(full, "hutchd.json"), `{"url": "http://127.0.0.1:9999"}`)
	writeFile(t, filepath.Join(full, "token"), "file-token\n")
	tokenOnly := t.TempDir()
	writeFile(t, filepath.Join(tokenOnly, "token"), "  tok2  ")

	tests := []struct {
		name             string
		flagURL, flagTok string
		env              map[string]string
		want             target
	}{
		{
			name: "state files",
			env:  map[string]string{"HUTCH_STATE_DIR": full},
			want: target{URL: "http://127.0.0.1:9999", Token: "file-token"},
		},
		{
			name: "default URL without hutchd.json",
			env:  map[string]string{"HUTCH_STATE_DIR": tokenOnly},
			want: target{URL: client.DefaultURL, Token: "tok2"},
		},
		{
			name: "env overrides state files",
			env:  map[string]string{"HUTCH_STATE_DIR": full, "HUTCH_URL": "http://env:1", "HUTCH_TOKEN": "env-token"},
			want: target{URL: "http://env:1", Token: "env-token"},
		},
		{
			name:    "flags override env",
			flagURL: "http://flag:2", flagTok: "flag-token",
			env:  map[string]string{"HUTCH_STATE_DIR": full, "HUTCH_URL": "http://env:1", "HUTCH_TOKEN": "env-token"},
			want: target{URL: "http://flag:2", Token: "flag-token"},
		},
		{
			name: "empty env values are ignored",
			env:  map[string]string{"HUTCH_STATE_DIR": full, "HUTCH_URL": "", "HUTCH_TOKEN": ""},
			want: target{URL: "http://127.0.0.1:9999", Token: "file-token"},
		},
		{
			name: "env token with no state dir at all",
			env:  map[string]string{"HUTCH_STATE_DIR": filepath.Join(full, "missing"), "HUTCH_TOKEN": "t"},
			want: target{URL: client.DefaultURL, Token: "t"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := discover(tt.flagURL, tt.flagTok, envOf(tt.env))
			if err != nil || got != tt.want {
				t.Errorf("discover = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestDiscoverTokenErrors(t *testing.T) {
	missing := t.TempDir()
	empty := t.TempDir()
	writeFile(t, filepath.Join(empty, "token"), "\n")
	unreadable := t.TempDir()
	// A directory where the token file should be cannot be read, even by root.
	if err := os.Mkdir(filepath.Join(unreadable, "token"), 0o700); err != nil {
		t.Fatal(err)
	}
	badJSON := t.TempDir()
	writeFile(t, filepath.Join(badJSON, "hutchd.json"), "{not json")
	writeFile(t, filepath.Join(badJSON, "token"), "x")

	tests := []struct {
		name, dir, wantText string
		wantCode            errdefs.Code
	}{
		{"missing token", missing, "HUTCH_TOKEN", errdefs.CodeUnauthenticated},
		{"empty token", empty, "HUTCH_TOKEN", errdefs.CodeUnauthenticated},
		{"unreadable token", unreadable, "run as root or set HUTCH_TOKEN", errdefs.CodeUnauthenticated},
		{"malformed hutchd.json", badJSON, "HUTCH_URL", errdefs.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := discover("", "", envOf(map[string]string{"HUTCH_STATE_DIR": tt.dir}))
			if !errdefs.IsCode(err, tt.wantCode) || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("discover = %v; want %s mentioning %q", err, tt.wantCode, tt.wantText)
			}
		})
	}
}

func TestDiscoverPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file; permission errors cannot be produced")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "token"), "secret")
	if err := os.Chmod(filepath.Join(dir, "token"), 0); err != nil {
		t.Fatal(err)
	}
	_, err := discover("", "", envOf(map[string]string{"HUTCH_STATE_DIR": dir}))
	if !strings.Contains(err.Error(), "run as root or set HUTCH_TOKEN") {
		t.Errorf("discover = %v; want the run-as-root hint", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestJoinCommand checks with a real bash that the joined command line gives bash exactly the
// words that were passed.
func TestJoinCommand(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	tests := [][]string{
		{"a b", "c"},
		{"it's", `"double"`, `back\slash`},
		{"$HOME", "`id`", "$(id)", "*", "~", "a;b", "x|y", "&&"},
		{"", "empty before", ""},
		{"line\nbreak", "tab\there", "ünïcödé"},
		{"FOO=bar", "if", "'", "''"},
	}
	for _, words := range tests {
		line := JoinCommand(append([]string{"printf", `<%s>\n`}, words...))
		out, err := exec.Command(bash, "-c", line).Output()
		if err != nil {
			t.Errorf("bash -c %q: %v", line, err)
			continue
		}
		var want strings.Builder
		for _, w := range words {
			want.WriteString("<" + w + ">\n")
		}
		if string(out) != want.String() {
			t.Errorf("bash -c %q printed %q; want %q", line, out, want.String())
		}
	}
	// A single argument is passed verbatim, so shell syntax works.
	if got := JoinCommand([]string{"echo $HOME && ls"}); got != "echo $HOME && ls" {
		t.Errorf("JoinCommand(single) = %q", got)
	}
}

func TestParseEnv(t *testing.T) {
	got, err := parseEnv([]string{"A=1", "B=", "C=x=y"})
	if err != nil || got["A"] != "1" || got["B"] != "" || got["C"] != "x=y" || len(got) != 3 {
		t.Errorf("parseEnv = %v, %v", got, err)
	}
	for _, bad := range []string{"NOEQUALS", "=v"} {
		if _, err := parseEnv([]string{bad}); err == nil {
			t.Errorf("parseEnv(%q) = nil error", bad)
		}
	}
}
