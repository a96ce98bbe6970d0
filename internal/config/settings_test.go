package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/egress/webhook"
)

// TestSettingsCoverConfig: every Config field has exactly one setting, whose JSON key is the
// field's json tag; flags and variables are unique, and each flag's help names its variable.
func TestSettingsCoverConfig(t *testing.T) {
	var c Config
	byAddr := map[uintptr]setting{}
	flags, envs := map[string]bool{}, map[string]bool{}
	for _, s := range settings {
		addr := reflect.ValueOf(s.field(&c)).Pointer()
		if _, dup := byAddr[addr]; dup {
			t.Errorf("two settings for the field of %s", s.json)
		}
		byAddr[addr] = s
		if s.flag == "" || s.env == "" || s.json == "" || flags[s.flag] || envs[s.env] {
			t.Errorf("setting %s: flag %q env %q: want both set and unique", s.json, s.flag, s.env)
		}
		flags[s.flag], envs[s.env] = true, true
		if !strings.HasPrefix(s.env, "HUTCH_") || !strings.Contains(s.usage, "env "+s.env) {
			t.Errorf("setting %s: usage %q does not name its variable %s", s.json, s.usage, s.env)
		}
	}
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		s, ok := byAddr[v.Field(i).Addr().Pointer()]
		if !ok {
			t.Errorf("Config.%s has no setting", f.Name)
			continue
		}
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != s.json {
			t.Errorf("Config.%s: json tag %q, setting says %q", f.Name, tag, s.json)
		}
	}
	if len(settings) != v.NumField() {
		t.Errorf("%d settings for %d fields", len(settings), v.NumField())
	}
}

// TestEverySettingReachable sets each setting alone from each source (its flag, its HUTCH_*
// variable, the config file) and checks that the field got the value.
func TestEverySettingReachable(t *testing.T) {
	dir := t.TempDir()
	for _, s := range settings {
		for _, src := range []string{"flag", "env", "file"} {
			t.Run(s.json+"/"+src, func(t *testing.T) {
				text, js, check := sample(t, s, src)
				var args []string
				getenv := env(nil)
				switch src {
				case "flag":
					args = []string{"--" + s.flag, text}
					if _, ok := s.field(&Config{}).(*bool); ok {
						args = []string{"--" + s.flag}
					}
				case "env":
					getenv = env(map[string]string{s.env: text})
				case "file":
					file := filepath.Join(dir, s.json+".json")
					if err := os.WriteFile(file, []byte(`{"`+s.json+`": `+js+`}`), 0o600); err != nil {
						t.Fatal(err)
					}
					args = []string{"--config", file}
				}
				// The sample values need not form a valid configuration: Load returns what it
				// read along with Validate's error; only a parse error loses it.
				cfg, err := Load(args, getenv)
				if err != nil && reflect.ValueOf(cfg).IsZero() {
					t.Fatalf("Load(%v): %v", args, err)
				}
				check(t, s.field(&cfg))
			})
		}
	}
}

// sample returns a value for s from src, as command-line or env text and as JSON, and the
// check of the field that results.
func sample(t *testing.T, s setting, src string) (text, js string, check func(*testing.T, any)) {
	n := map[string]int{"flag": 1, "env": 2, "file": 3}[src]
	want := func(w any) func(*testing.T, any) {
		return func(t *testing.T, got any) {
			t.Helper()
			if g := reflect.ValueOf(got).Elem().Interface(); !reflect.DeepEqual(g, w) {
				t.Errorf("%s from %s = %#v, want %#v", s.json, src, g, w)
			}
		}
	}
	switch s.json {
	case "upstreams":
		return "up" + src + "=127.0.0.1:8" + src[:1], `{"up` + src + `": "127.0.0.1:8` + src[:1] + `"}`,
			func(t *testing.T, got any) {
				if (*got.(*map[string]string))["up"+src] != "127.0.0.1:8"+src[:1] {
					t.Errorf("upstreams from %s = %v", src, *got.(*map[string]string))
				}
			}
	case "egressHandlers":
		h := webhook.Config{URL: "http://127.0.0.1:9/" + src, SigningSecret: "SEC"}
		return "h" + src + "=SEC@" + h.URL, `{"h` + src + `": {"url": "` + h.URL + `", "signingSecret": "SEC"}}`,
			want(map[string]webhook.Config{"h" + src: h})
	}
	switch s.field(&Config{}).(type) {
	case *string:
		v := "/v/" + src
		return v, `"` + v + `"`, want(v)
	case *int:
		v := strconv.Itoa(700 + n)
		return v, v, want(700 + n)
	case *Duration:
		d := time.Duration(70+n) * time.Second
		return d.String(), `"` + d.String() + `"`, want(Duration(d))
	case *Switch:
		return "off", `"off"`, want(Switch(false)) // every default is on
	case *bool:
		return "true", "true", want(true) // the default is false
	case *[]string:
		v := "10." + string(rune('0'+n)) + ".0.0/16"
		b, _ := json.Marshal([]string{v})
		return v, string(b), func(t *testing.T, got any) {
			if l := *got.(*[]string); !containsString(l, v) {
				t.Errorf("%s from %s = %v, want it to hold %q", s.json, src, l, v)
			}
		}
	}
	t.Fatalf("no sample for %s", s.json)
	return "", "", nil
}

func containsString(l []string, v string) bool {
	l = append([]string(nil), l...)
	sort.Strings(l)
	i := sort.SearchStrings(l, v)
	return i < len(l) && l[i] == v
}

// TestSwitchForms: "on"/"off" settings read "on" and "off" from flags, variables and the
// config file (and JSON booleans from the file); other text is refused.
func TestSwitchForms(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hutchd.json")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		file string
		want bool
		ok   bool
	}{
		{"flag off", []string{"--userns", "off"}, nil, "", false, true},
		{"flag on over env off", []string{"--userns", "on"}, map[string]string{"HUTCH_USERNS": "off"}, "", true, true},
		{"env off", nil, map[string]string{"HUTCH_USERNS": "off"}, "", false, true},
		{"file off", nil, nil, `{"userns": "off"}`, false, true},
		{"file false", nil, nil, `{"userns": false}`, false, true},
		{"file on", nil, nil, `{"userns": "on"}`, true, true},
		// null leaves the default, as a config file written for the string setting may say.
		{"file null", nil, nil, `{"userns": null, "diskQuota": null, "sleepMemory": null}`, true, true},
		{"flag yes", []string{"--userns", "yes"}, nil, "", false, false},
		{"env true", nil, map[string]string{"HUTCH_USERNS": "true"}, "", false, false},
		{"file maybe", nil, nil, `{"userns": "maybe"}`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--config", file}, args...)
			}
			cfg, err := Load(args, env(tc.env))
			if !tc.ok {
				if !errdefsInvalid(err) {
					t.Fatalf("Load = %v; want an invalid-argument error", err)
				}
				return
			}
			if err != nil || bool(cfg.UserNS) != tc.want {
				t.Fatalf("UserNS = %v, %v; want %v", cfg.UserNS, err, tc.want)
			}
		})
	}
}

// TestDefaultsUnchanged pins the built-in defaults that come from the settings table.
func TestDefaultsUnchanged(t *testing.T) {
	got := Defaults()
	want := Config{
		StateDir: "/var/lib/hutch", Listen: "127.0.0.1:7411", RuncBinary: "runc", Runtime: "runc", RunscBinary: "runsc",
		RunscPlatform: "systrap", Subnet: "10.88.0.0/16", IfPrefix: "hsb", NSPrefix: "hutch-", NftTable: "hutch",
		CgroupParent: "hutch", DNSPort: 15053, HTTPPort: 15001, TLSPort: 15002, StopGrace: Duration(5 * time.Second),
		PreviewListen: "127.0.0.1:7412", PreviewDomain: "localhost", ProcessLogBytes: 4 << 20, APIRateLimit: 1000,
		ProcessRetention: Duration(time.Hour), LogLevel: "info", MaxConnsPerClient: DefaultMaxConnsPerClient,
		LogMaxBytes: 16 << 20, LogFiles: 3, LogValueMaxBytes: 1 << 10, LogSandboxRate: 5, AuditLogMaxBytes: 16 << 20,
		AuditLogFiles: 3, EgressLogMaxBytes: 8 << 20, EgressLogFiles: 2, BlobStore: "local",
		BackupGCInterval: Duration(10 * time.Minute), BackupOrphanAge: Duration(time.Hour), SnapshotMaxFrozen: Duration(time.Minute),
		SleepSnapshotsKeep: 1, SnapshotQuotaBytes: 20_000_000_000, DataVolumeSize: "auto",
		DiskQuota: true, SleepMemory: true, UserNS: true,
		// Host-dependent: checked for shape only.
		AgentBinary: got.AgentBinary, Upstreams: map[string]string{}, ExtraCACerts: got.ExtraCACerts, ConsoleDir: got.ConsoleDir,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Defaults() =\n%+v\nwant\n%+v", got, want)
	}
	if filepath.Base(got.AgentBinary) != "hutch-init" {
		t.Errorf("AgentBinary = %q", got.AgentBinary)
	}
}

// TestNullLists: null for a list setting in the config file leaves it at its default (empty
// for these), to which the flags and variables still add.
func TestNullLists(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hutchd.json")
	if err := os.WriteFile(file, []byte(`{"upstreams": null, "denyRanges": null, "egressRootCAs": null}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", file, "--upstream", "git.internal=127.0.0.1:80", "--deny-range", "10.9.0.0/16"},
		env(map[string]string{"HUTCH_UPSTREAMS": "npm.internal=127.0.0.1:81"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Upstreams) != 2 || cfg.Upstreams["git.internal"] != "127.0.0.1:80" || cfg.Upstreams["npm.internal"] != "127.0.0.1:81" {
		t.Errorf("Upstreams = %v; want the flag's and the variable's", cfg.Upstreams)
	}
	if !slices.Contains(cfg.DenyRanges, "10.9.0.0/16") {
		t.Errorf("DenyRanges = %v; want the flag's", cfg.DenyRanges)
	}
}
