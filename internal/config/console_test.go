package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestConsoleDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"env", nil, map[string]string{"HUTCH_CONSOLE_DIR": "/srv/console"}, "/srv/console"},
		{"flag wins", []string{"--console-dir", "/opt/console"}, map[string]string{"HUTCH_CONSOLE_DIR": "/srv/console"}, "/opt/console"},
		{"off", []string{"--console-dir", "off"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(tc.args, env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ConsoleDir != tc.want {
				t.Errorf("ConsoleDir = %q, want %q", cfg.ConsoleDir, tc.want)
			}
		})
	}
}

func TestDefaultConsoleDir(t *testing.T) {
	repo := t.TempDir()
	exe := filepath.Join(repo, "bin", "hutchd")
	if got := defaultConsoleDir(exe); got != "" {
		t.Errorf("without a build: %q, want empty", got)
	}
	dist := filepath.Join(repo, "web", "console", "dist")
	if err := os.MkdirAll(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := defaultConsoleDir(exe); got != dist {
		t.Errorf("with a build: %q, want %q", got, dist)
	}
	if got := defaultConsoleDir(""); got != "" {
		t.Errorf("unknown executable: %q", got)
	}
}
