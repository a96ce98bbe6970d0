package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hutchd.json")
	if err := os.WriteFile(file, []byte(`{"listen":"127.0.0.1:1","stopGrace":"9s","upstreams":{"a.internal":"127.0.0.1:80"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", file, "--listen", "127.0.0.1:3"}, env(map[string]string{
		"HUTCH_LISTEN":    "127.0.0.1:2",
		"HUTCH_STATE_DIR": "/srv/hutch",
		"HUTCH_UPSTREAMS": "git.internal=127.0.0.1:8418",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:3" {
		t.Errorf("Listen = %q; the flag must win", cfg.Listen)
	}
	if cfg.StateDir != "/srv/hutch" || cfg.ImagesDir != "/srv/hutch/images" {
		t.Errorf("StateDir %q ImagesDir %q", cfg.StateDir, cfg.ImagesDir)
	}
	if time.Duration(cfg.StopGrace) != 9*time.Second {
		t.Errorf("StopGrace = %v", time.Duration(cfg.StopGrace))
	}
	if cfg.Upstreams["a.internal"] != "127.0.0.1:80" || cfg.Upstreams["git.internal"] != "127.0.0.1:8418" {
		t.Errorf("Upstreams = %v", cfg.Upstreams)
	}
	if !cfg.DiskQuota {
		t.Errorf("DiskQuota = %v; want the default on", cfg.DiskQuota)
	}
	if cfg, err := Load(nil, env(map[string]string{"HUTCH_DISK_QUOTA": "off"})); err != nil || cfg.DiskQuota {
		t.Errorf("HUTCH_DISK_QUOTA=off: %v, %v", cfg.DiskQuota, err)
	}
	if !cfg.SleepMemory {
		t.Errorf("SleepMemory = %v; want the default on", cfg.SleepMemory)
	}
	if cfg, err := Load([]string{"--sleep-memory", "off"}, env(nil)); err != nil || cfg.SleepMemory {
		t.Errorf("--sleep-memory off: %v, %v", cfg.SleepMemory, err)
	}
	if _, err := Load([]string{"--sleep-memory", "swap"}, env(nil)); err == nil {
		t.Errorf("--sleep-memory swap accepted")
	}
	if cfg.MaxConns != 0 || cfg.MaxConnsPerClient != DefaultMaxConnsPerClient {
		t.Errorf("MaxConns %d MaxConnsPerClient %d; want the defaults 0 (auto) and %d", cfg.MaxConns, cfg.MaxConnsPerClient, DefaultMaxConnsPerClient)
	}
	if err := os.WriteFile(file, []byte(`{"maxConns":500,"maxConnsPerClient":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args          []string
		env           map[string]string
		conns, client int
	}{
		{[]string{"--config", file}, nil, 500, 7},
		{[]string{"--config", file}, map[string]string{"HUTCH_MAX_CONNS": "600", "HUTCH_MAX_CONNS_PER_CLIENT": "-1"}, 600, -1},
		{[]string{"--config", file, "--max-conns", "700", "--max-conns-per-client", "9"}, map[string]string{"HUTCH_MAX_CONNS": "600"}, 700, 9},
	} {
		cfg, err := Load(tc.args, env(tc.env))
		if err != nil || cfg.MaxConns != tc.conns || cfg.MaxConnsPerClient != tc.client {
			t.Errorf("Load(%v, %v): MaxConns %d MaxConnsPerClient %d (%v); want %d, %d", tc.args, tc.env, cfg.MaxConns, cfg.MaxConnsPerClient, err, tc.conns, tc.client)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--state-dir", "relative"},
		{"--listen", "nonsense"},
		{"--subnet", "10.0.0.0/30"},
		{"--upstream", "git.internal=not-an-addr"},
		{"--upstream", "missing-equals"},
		{"--dns-port", "70000"},
		{"--log-level", "loud"},
		{"--disk-quota", "maybe"},
		{"--userns", "true"},
		{"--log-file", "relative.log"},
		{"--log-max-bytes", "1000"},
		{"--log-files", "-1"},
		{"--audit-log-files", "1000"},
		{"--egress-log-max-bytes", "10"},
		{"--log-value-max-bytes", "8"},
		{"--log-sandbox-rate", "-5"},
		{"--max-conns", "-5"},
		{"--max-conns-per-client", "-2"},
		{"--no-such-flag"},
		{"--stop-grace", "-5s"},
		{"--process-retention", "-1h"},
	} {
		if _, err := Load(args, env(nil)); !errdefsInvalid(err) {
			t.Errorf("Load(%v) = %v; want an invalid-argument error", args, err)
		}
	}
}

func errdefsInvalid(err error) bool {
	return err != nil && errdefs.CodeOf(err) == errdefs.CodeInvalidArgument
}

// TestLogBounds: the bounds of hutchd's log, the audit log and the egress event files have
// defaults and are set by the config file, the HUTCH_* twins and the flags, in that order.
func TestLogBounds(t *testing.T) {
	def, err := Load(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if def.LogFile != "" || def.LogMaxBytes != 16<<20 || def.LogFiles != 3 || def.LogValueMaxBytes != 1024 || def.LogSandboxRate != 5 ||
		def.AuditLogMaxBytes != 16<<20 || def.AuditLogFiles != 3 || def.EgressLogMaxBytes != 8<<20 || def.EgressLogFiles != 2 {
		t.Errorf("defaults: %+v", def)
	}
	file := filepath.Join(t.TempDir(), "hutchd.json")
	if err := os.WriteFile(file, []byte(`{"logFile":"/var/log/a.log","logMaxBytes":1048576,"logFiles":5,"auditLogMaxBytes":2097152,"egressLogFiles":4,"logSandboxRate":-1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", file, "--log-files", "7", "--egress-log-max-bytes", "131072"}, env(map[string]string{
		"HUTCH_LOG_FILE":            "/var/log/b.log",
		"HUTCH_LOG_FILES":           "6",
		"HUTCH_AUDIT_LOG_FILES":     "9",
		"HUTCH_LOG_VALUE_MAX_BYTES": "256",
	}))
	if err != nil {
		t.Fatal(err)
	}
	got := []int{cfg.LogMaxBytes, cfg.LogFiles, cfg.LogValueMaxBytes, cfg.LogSandboxRate, cfg.AuditLogMaxBytes, cfg.AuditLogFiles, cfg.EgressLogMaxBytes, cfg.EgressLogFiles}
	want := []int{1 << 20, 7, 256, -1, 2 << 20, 9, 128 << 10, 4}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bounds = %v; want %v", got, want)
			break
		}
	}
	if cfg.LogFile != "/var/log/b.log" {
		t.Errorf("LogFile = %q; the env twin must win over the file", cfg.LogFile)
	}
}

// TestConfigFileForms: the file's keys are checked (a misspelt one is an error, not a setting
// silently left at its default), null leaves a duration at its default, and upstream names are
// lowercased as the flag's are.
func TestConfigFileForms(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hutchd.json")
	for _, tc := range []struct {
		name, file string
		ok         bool
		check      func(Config) bool
	}{
		{"misspelt key", `{"denyRange": ["10.0.0.0/8"]}`, false, nil},
		{"two values", `{"listen": "127.0.0.1:1"} {"listen": "127.0.0.1:2"}`, false, nil},
		{"negative duration", `{"stopGrace": "-5s"}`, false, nil},
		{"null duration", `{"stopGrace": null}`, true, func(c Config) bool { return c.StopGrace == Defaults().StopGrace }},
		{"upstream name case", `{"upstreams": {"Git.Internal": "127.0.0.1:80"}}`, true, func(c Config) bool { return c.Upstreams["git.internal"] == "127.0.0.1:80" && len(c.Upstreams) == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load([]string{"--config", file}, env(nil))
			if !tc.ok {
				if !errdefsInvalid(err) {
					t.Fatalf("Load = %v; want an invalid-argument error", err)
				}
				return
			}
			if err != nil || !tc.check(c) {
				t.Fatalf("Load = %+v, %v", c, err)
			}
		})
	}
}
