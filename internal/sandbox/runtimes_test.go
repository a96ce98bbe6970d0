package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/runsc"
	"github.com/hutchdev/hutch/internal/store"
)

// namedRuntime is a runtime.Runtime that only has a name: backend selection never calls more.
type namedRuntime struct {
	runtime.Runtime
	name string
}

func (n namedRuntime) Name() string { return n.name }

func TestRuntimeSelection(t *testing.T) {
	m := &Manager{runtimes: map[string]runtime.Runtime{}, unavailable: map[string]error{}}
	m.AddRuntime(namedRuntime{name: RuntimeRunc})
	m.SetRuntimeUnavailable(RuntimeGVisor, errors.New("runsc not found"))
	if err := m.SetDefaultRuntime(RuntimeRunc); err != nil || m.DefaultRuntime() != RuntimeRunc {
		t.Fatalf("SetDefaultRuntime(runc) = %v", err)
	}
	for _, tc := range []struct {
		name string
		code errdefs.Code
	}{
		{RuntimeRunc, ""},
		{RuntimeGVisor, errdefs.CodeRuntimeNotAvailable},
		{"kata", errdefs.CodeInvalidRuntime},
		{"", errdefs.CodeInvalidRuntime},
	} {
		_, err := m.backend(tc.name)
		if tc.code == "" && err != nil || tc.code != "" && !errdefs.IsCode(err, tc.code) {
			t.Errorf("backend(%q) = %v, want code %q", tc.name, err, tc.code)
		}
	}
	if err := m.SetDefaultRuntime(RuntimeGVisor); !errdefs.IsCode(err, errdefs.CodeRuntimeNotAvailable) {
		t.Errorf("SetDefaultRuntime(gvisor) without runsc = %v", err)
	}
	m.AddRuntime(namedRuntime{name: RuntimeGVisor})
	if err := m.SetDefaultRuntime(RuntimeGVisor); err != nil {
		t.Errorf("SetDefaultRuntime(gvisor) after AddRuntime = %v", err)
	}
}

func TestTCPAgentArgs(t *testing.T) {
	got := tcpAgentArgs([]string{agentInContainer, "--listen-fd", "3", "--workdir", workspace})
	want := []string{agentInContainer, "--listen-tcp", "127.0.0.1:30999", "--workdir", workspace}
	if !slices.Equal(got, want) {
		t.Errorf("tcpAgentArgs = %q, want %q", got, want)
	}
}

// TestDialPortRefusesAgentPort: the agent's port of a gVisor sandbox is never dialled for a
// client, whatever the sandbox.
func TestDialPortRefusesAgentPort(t *testing.T) {
	m := &Manager{}
	for _, port := range []int{AgentPort, 0, 65536} {
		if _, err := m.DialPort(context.Background(), "sb1", port); !errdefs.IsCode(err, errdefs.CodeInvalidPort) {
			t.Errorf("DialPort(%d) = %v, want INVALID_PORT", port, err)
		}
	}
}

// TestSleepNote checks what a sleeping sandbox's info says about its sleep on each runtime.
func TestSleepNote(t *testing.T) {
	m := &Manager{runtimes: map[string]runtime.Runtime{}, unavailable: map[string]error{}, instances: map[string]*instance{}}
	m.AddRuntime(namedRuntime{name: RuntimeRunc})
	cases := []struct {
		runtime, want string
	}{
		{RuntimeRunc, "runtime runc cannot checkpoint memory"},
		{RuntimeGVisor, "runtime gvisor is not available"},
	}
	if _, err := exec.LookPath("runsc"); err == nil {
		dir := t.TempDir()
		rt, err := runsc.New(runsc.Config{Root: filepath.Join(dir, "root"), BundleDir: filepath.Join(dir, "bundles")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		m.AddRuntime(rt)
		cases[1].want = "this sleep kept the disk only"
	}
	for _, c := range cases {
		in := m.info(store.Sandbox{ID: "s", Runtime: c.runtime, Status: string(StatusSleeping)})
		if in.SleepMode != SleepModeDisk || !strings.Contains(in.SleepNote, c.want) {
			t.Errorf("%s: sleepMode %q, sleepNote %q; want disk and %q", c.runtime, in.SleepMode, in.SleepNote, c.want)
		}
		if in := m.info(store.Sandbox{ID: "s", Runtime: c.runtime, Status: string(StatusRunning)}); in.SleepMode != "" || in.SleepNote != "" {
			t.Errorf("%s running: sleepMode %q, sleepNote %q; want none", c.runtime, in.SleepMode, in.SleepNote)
		}
	}
	// A sleep record (written at each sleep) decides, whatever the runtime.
	m.cfg.DataDir = t.TempDir()
	if err := os.MkdirAll(m.sandboxDir("s"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, r := range []sleepRecord{
		{Mode: SleepModeMemory},
		{Mode: SleepModeDisk, Note: "gVisor could not checkpoint the sandbox (x)"},
	} {
		if err := m.writeSleepRecord("s", r); err != nil {
			t.Fatal(err)
		}
		in := m.info(store.Sandbox{ID: "s", Runtime: RuntimeGVisor, Status: string(StatusSleeping)})
		if in.SleepMode != r.Mode || in.SleepNote != r.Note {
			t.Errorf("record %+v: sleepMode %q, sleepNote %q", r, in.SleepMode, in.SleepNote)
		}
	}
	// A record that cannot be read counts as none.
	if err := os.WriteFile(m.sleepRecPath("s"), []byte(`{"mode":"swap"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if in := m.info(store.Sandbox{ID: "s", Runtime: RuntimeRunc, Status: string(StatusSleeping)}); in.SleepMode != SleepModeDisk || !strings.Contains(in.SleepNote, "cannot checkpoint") {
		t.Errorf("bad record: sleepMode %q, sleepNote %q", in.SleepMode, in.SleepNote)
	}
}
