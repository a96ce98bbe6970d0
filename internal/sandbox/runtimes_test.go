package sandbox

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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

func TestSocketAgentArgs(t *testing.T) {
	got := socketAgentArgs([]string{agentInContainer, "--listen-fd", "3", "--workdir", workspace})
	want := []string{agentInContainer, "--socket", "/.hutch/run/agent.sock", "--workdir", workspace}
	if !slices.Equal(got, want) {
		t.Errorf("socketAgentArgs = %q, want %q", got, want)
	}
}

// TestDialAgentRefusesSymlinks: the sandbox owns its agent socket directory; a symlink it
// plants there must not make hutchd connect to another socket of the host.
func TestDialAgentRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := &Manager{agentsDir: f}
	// A host socket the sandbox would like hutchd to talk to.
	victim := filepath.Join(t.TempDir(), "victim.sock")
	vl, err := net.Listen("unix", victim)
	if err != nil {
		t.Fatal(err)
	}
	defer vl.Close()
	sockDir, err := m.prepareAgentSocketDir("sb1")
	if err != nil {
		t.Fatal(err)
	}
	if sockDir != filepath.Join(dir, "sb1.d") {
		t.Errorf("socket dir = %s", sockDir)
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	ctx := context.Background()
	if _, err := m.dialAgent(ctx, d, "sb1"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("dial before the agent listens: %v, want ENOENT", err)
	}
	if err := os.Symlink(victim, filepath.Join(sockDir, agentSocketName)); err != nil {
		t.Fatal(err)
	}
	if c, err := m.dialAgent(ctx, d, "sb1"); err == nil {
		c.Close()
		t.Fatal("dialAgent followed a symlink to a host socket")
	}
	os.Remove(filepath.Join(sockDir, agentSocketName))
	al, err := net.Listen("unix", filepath.Join(sockDir, agentSocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	c, err := m.dialAgent(ctx, d, "sb1")
	if err != nil {
		t.Fatalf("dial the real agent socket: %v", err)
	}
	c.Close()
	// A sandbox without its own socket dir dials the socket hutchd made.
	if _, err := net.Listen("unix", filepath.Join(dir, "sb2.sock")); err != nil {
		t.Fatal(err)
	}
	if c, err := m.dialAgent(ctx, d, "sb2"); err != nil {
		t.Errorf("dial sb2: %v", err)
	} else {
		c.Close()
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
		cases[1].want = "gVisor cannot checkpoint this sandbox"
	}
	for _, c := range cases {
		in := m.info(store.Sandbox{ID: "s", Runtime: c.runtime, Status: store.StatusSleeping})
		if in.SleepMode != SleepModeDisk || !strings.Contains(in.SleepNote, c.want) {
			t.Errorf("%s: sleepMode %q, sleepNote %q; want disk and %q", c.runtime, in.SleepMode, in.SleepNote, c.want)
		}
		if in := m.info(store.Sandbox{ID: "s", Runtime: c.runtime, Status: store.StatusRunning}); in.SleepMode != "" || in.SleepNote != "" {
			t.Errorf("%s running: sleepMode %q, sleepNote %q; want none", c.runtime, in.SleepMode, in.SleepNote)
		}
	}
}
