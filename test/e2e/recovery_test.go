package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/testutil"
)

// leftovers is everything of the test daemon's sandboxes the host holds.
type leftovers struct {
	containers []string // runc containers (any state)
	netns      []string // /var/run/netns/<nsPrefix>*
	links      []string // host links <ifPrefix>*
	mounts     []string // mounts under <state>/sandboxes
	cgroups    []string // cgroup dirs of the sandboxes
	inits      []string // PIDs of sandbox PID 1s (hutch-init; on gVisor the Sentry) in e2e-* cgroups
}

func (l leftovers) String() string {
	return fmt.Sprintf("containers=%v netns=%v links=%v mounts=%v cgroups=%v inits=%v",
		l.containers, l.netns, l.links, l.mounts, l.cgroups, l.inits)
}

// runcContainers lists the test daemon's containers, ID → status: runc's and, when runsc is
// installed, runsc's (the gvisor runtime; <state>/runsc), so the checks hold on both runtimes.
func runcContainers(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	tools := [][]string{{"runc", "--root", filepath.Join(d.StateDir, "runc"), "list", "--format", "json"}}
	if have("runsc") {
		tools = append(tools, []string{"runsc", "--root", filepath.Join(d.StateDir, "runsc"), "list", "--format", "json"})
	}
	for _, args := range tools {
		if args[0] == "runsc" {
			if _, err := os.Stat(args[2]); err != nil {
				continue // hutchd made no runsc state directory
			}
		}
		out, err := exec.Command(args[0], args[1:]...).Output()
		if err != nil {
			t.Fatalf("%s list: %v", args[0], err)
		}
		var list []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if s := strings.TrimSpace(string(out)); s != "" && s != "null" {
			if err := json.Unmarshal(out, &list); err != nil {
				t.Fatalf("%s list: %v: %s", args[0], err, out)
			}
		}
		for _, c := range list {
			// runsc knows sandbox "x" as "x." (internal/runtime/runsc: runscID).
			m[strings.TrimSuffix(c.ID, ".")] = c.Status
		}
	}
	return m
}

func countRuncContainers(t *testing.T, id string) int {
	if _, ok := runcContainers(t)[id]; ok {
		return 1
	}
	return 0
}

func scanLeftovers(t *testing.T) leftovers {
	t.Helper()
	var l leftovers
	for id := range runcContainers(t) {
		l.containers = append(l.containers, id)
	}
	if ents, err := os.ReadDir("/var/run/netns"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), nsPrefix) {
				l.netns = append(l.netns, strings.TrimPrefix(e.Name(), nsPrefix))
			}
		}
	}
	if ents, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ifPrefix) {
				l.links = append(l.links, e.Name())
			}
		}
	}
	l.mounts = mountsUnder(filepath.Join(d.StateDir, "data", "sandboxes"))
	for _, ctl := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		ents, err := os.ReadDir(filepath.Join(ctl, cgroupDir))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "e2e-") {
				l.cgroups = append(l.cgroups, filepath.Join(ctl, cgroupDir, e.Name()))
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		// A sandbox's PID 1 is "/.hutch/hutch-init --listen-fd 3 …"; its server child runs
		// "hutch-init serve …" and each command's shell "hutch-init shim …".
		// On gVisor the sandbox's processes live in its Sentry ("runsc-sandbox … boot …"),
		// which stands for them here.
		sentry := args[0] == "runsc-sandbox" && slices.Contains(args, "boot")
		if !sentry && (args[0] != "/.hutch/hutch-init" || len(args) < 2 || !strings.HasPrefix(args[1], "--")) {
			continue
		}
		cg, err := os.ReadFile(filepath.Join(filepath.Dir(p), "cgroup"))
		if err == nil && strings.Contains(string(cg), "/"+cgroupDir+"/e2e-") {
			l.inits = append(l.inits, filepath.Base(filepath.Dir(p)))
		}
	}
	for _, s := range [][]string{l.containers, l.netns, l.links, l.mounts, l.cgroups, l.inits} {
		sort.Strings(s)
	}
	return l
}

// plantStrayCgroup makes cgroup name below the daemon's cgroup parent on every hierarchy
// scanLeftovers reads, with a sleeping process in it; it returns the directories made and a
// channel that closes when the process is gone.
func plantStrayCgroup(t *testing.T, name string) ([]string, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	var dirs []string
	for _, ctl := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(ctl, cgroupDir)); err != nil {
			continue // not this host's layout, or the parent is not there
		}
		dir := filepath.Join(ctl, cgroupDir, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 0 {
		t.Fatalf("no %s cgroup parent to plant a stray cgroup in", cgroupDir)
	}
	return dirs, done
}

// TestRecoveryAfterKill9 kills hutchd with SIGKILL while sandboxes are being created, restarts
// it, and checks that every sandbox is either running (re-adopted or finished) or stopped, with
// no stray container, mount, network namespace, veth, cgroup or process; then that all of them
// work again and that destroying them leaves nothing behind.
func TestRecoveryAfterKill9(t *testing.T) {
	requireEnv(t)
	ids := []string{"e2e-rec-0", "e2e-rec-1", "e2e-rec-2", "e2e-rec-3"}
	// One running sandbox with a process that must survive the restart (re-adoption).
	survivor, err := d.Client().Sandbox(ctxT(t, 5*time.Minute), "e2e-rec-keep", &client.SandboxOptions{InstanceType: "lite"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := survivor.Exec(ctxT(t, time.Minute), "nohup sleep 1000 >/dev/null 2>&1 &", nil); err != nil {
		t.Fatal(err)
	}

	// Kill hutchd as soon as the first new sandbox has its network namespace: that create is
	// then half done (record, mount and network made; container and agent in progress).
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Errors are expected: the daemon dies under these calls.
			d.Client().Sandbox(ctxT(t, time.Minute), id, &client.SandboxOptions{InstanceType: "lite"})
		}()
	}
	testutil.Poll(t, time.Millisecond, time.Minute, func() bool { return anyNetns(ids) })
	d.Kill9()
	wg.Wait()
	// A cgroup of ours with no sandbox, as a container's is left when hutchd or the host dies
	// around its delete, with a process in it: the restart removes both.
	strayCgroups, strayDone := plantStrayCgroup(t, "e2e-rec-stray")
	auditBefore := len(auditLog(t, d.StateDir))
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, id := range append(ids, "e2e-rec-keep") {
			d.Client().SandboxHandle(id).Destroy(ctxT(t, time.Minute))
		}
	})

	list, err := d.Client().ListSandboxes(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]bool{}
	for _, sb := range list {
		switch sb.Status {
		case "running":
			running[sb.ID] = true
		case "stopped":
		default:
			t.Errorf("sandbox %s has status %q after recovery; want running or stopped", sb.ID, sb.Status)
		}
	}
	t.Logf("running after recovery: %v (the others were interrupted)", running)
	if !running["e2e-rec-keep"] {
		t.Fatalf("the running sandbox was not re-adopted: %+v", list)
	}
	if ps := processes(t, survivor); !strings.Contains(ps, "sleep 1000") {
		t.Fatalf("the survivor's process did not survive the restart:\n%s", ps)
	}
	// Recovery's decisions are in the audit log: adopted for each running sandbox, stopped
	// for each interrupted create.
	recs := auditLog(t, d.StateDir)
	for _, sb := range list {
		if sb.ID != "e2e-rec-keep" && !slices.Contains(ids, sb.ID) {
			continue
		}
		want := map[string]string{"running": "adopted", "stopped": "stopped"}[string(sb.Status)]
		if r := findAudit(recs, auditBefore, "sandbox.recovered", sb.ID, "hutchd"); r == nil || r["outcome"] != want {
			t.Errorf("audit record of recovering %s (%s) = %v; want outcome %q", sb.ID, sb.Status, r, want)
		}
	}
	for _, cg := range strayCgroups {
		if _, err := os.Stat(cg); err == nil {
			t.Errorf("the stray cgroup %s is still there after the restart", cg)
		}
	}
	select {
	case <-strayDone:
	case <-time.After(10 * time.Second):
		t.Error("the process in the stray cgroup was not killed by the restart")
	}
	l := scanLeftovers(t)
	t.Logf("after restart: running=%v %s", running, l)
	// A running sandbox has two mounts: its disk (sandboxes/<id>/disk) and its root (rootfs).
	if len(l.containers) != len(running) || len(l.netns) != len(running) || len(l.links) != len(running) ||
		len(l.inits) != len(running) || len(l.mounts) != 2*len(running) {
		t.Fatalf("leftovers do not match the %d running sandboxes: %s", len(running), l)
	}
	for _, mp := range l.mounts {
		id, _, _ := strings.Cut(strings.TrimPrefix(mp, filepath.Join(d.StateDir, "data", "sandboxes")+"/"), "/")
		if !running[id] {
			t.Fatalf("mount %s belongs to no running sandbox: %s", mp, l)
		}
	}
	for _, id := range ids {
		if !running[id] {
			waitNoLoops(t, "/sandboxes/"+id+"/")
		}
	}
	for _, cg := range l.cgroups {
		if !running[filepath.Base(cg)] {
			t.Fatalf("cgroup %s belongs to no running sandbox: %s", cg, l)
		}
	}
	for _, id := range l.containers {
		if !running[id] {
			t.Fatalf("container %s runs but its sandbox is not running", id)
		}
	}
	// Every sandbox works again (stopped ones start on demand).
	for _, id := range append(ids, "e2e-rec-keep") {
		sb, err := d.Client().Sandbox(ctxT(t, 5*time.Minute), id, &client.SandboxOptions{InstanceType: "lite"})
		if err != nil {
			t.Fatalf("Sandbox(%s) after recovery: %v\n%s", id, err, d.LogTail())
		}
		if got := mustExec(t, sb, "hostname"); got != id+"\n" {
			t.Fatalf("hostname in %s = %q", id, got)
		}
	}
	// Destroying everything leaves nothing.
	for _, id := range append(ids, "e2e-rec-keep") {
		if err := d.Client().SandboxHandle(id).Destroy(ctxT(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	l = scanLeftovers(t)
	others := 0 // sandboxes of tests running in parallel are not ours to count
	if lst, err := d.Client().ListSandboxes(ctxT(t, time.Minute)); err == nil {
		others = len(lst)
	}
	if others == 0 && (len(l.containers)+len(l.netns)+len(l.links)+len(l.mounts)+len(l.inits)+len(l.cgroups) > 0) {
		t.Fatalf("leftovers after destroying everything: %s", l)
	}
}

func anyNetns(ids []string) bool {
	for _, id := range ids {
		if _, err := os.Stat("/var/run/netns/" + nsPrefix + id); err == nil {
			return true
		}
	}
	return false
}

// captureRuntimes are the runtimes the capture tests run on: runc always, gvisor when runsc
// is installed.
func captureRuntimes() []string {
	if have("runsc") {
		return []string{"runc", "gvisor"}
	}
	return []string{"runc"}
}

// killWhilePaused runs op (a snapshot or a fork of sandbox id, whose errors are expected: the
// daemon dies under it) and kills hutchd with SIGKILL as soon as the runtime reports id's
// container paused: op's capture holds the sandbox frozen then. The capture reads a file of
// random data that grow(n) writes into the sandbox (n MiB); when op ends before the poll saw
// the pause, the file is doubled and op tried again, so the test does not hang on the speed of
// the host. It fails the test if no try caught the pause.
func killWhilePaused(t *testing.T, id string, sb *client.Sandbox, op func(ctx context.Context)) {
	t.Helper()
	for mib := 256; mib <= 2048; mib *= 2 {
		// A user-space generator: /dev/urandom is slow under gVisor and a small CPU quota.
		mustExec(t, sb, fmt.Sprintf(`python3 -c 'import random, sys
for _ in range(%d): sys.stdout.buffer.write(random.randbytes(1<<20))' > /workspace/bulk && sync`, mib))
		done := make(chan struct{})
		go func() {
			defer close(done)
			op(context.Background())
		}()
		for {
			if runcContainers(t)[id] == "paused" {
				d.Kill9()
				<-done
				t.Logf("killed hutchd while %s was frozen by a capture of %d MiB", id, mib)
				return
			}
			select {
			case <-done:
			default:
				time.Sleep(5 * time.Millisecond)
				continue
			}
			break
		}
		t.Logf("the capture of %d MiB ended before the poll saw %s paused; trying a larger one", mib, id)
	}
	t.Fatalf("no capture of %s was seen holding it paused", id)
}

// startTicker starts a background process in sb that writes the time to /tmp/tick ten times a
// second, and returns a function that checks it still runs: the tick moves on.
func startTicker(t *testing.T, sb *client.Sandbox) func(when string) {
	t.Helper()
	mustExec(t, sb, "nohup sh -c 'while :; do date +%s%N > /tmp/tick.new; mv /tmp/tick.new /tmp/tick; sleep 0.1; done' >/dev/null 2>&1 &")
	return func(when string) {
		t.Helper()
		first := mustExec(t, sb, "sleep 0.3; cat /tmp/tick")
		// No interval: each look waits 0.3 s in the sandbox.
		if !testutil.Poll(t, 0, 30*time.Second, func() bool { return mustExec(t, sb, "sleep 0.3; cat /tmp/tick") != first }) {
			t.Fatalf("%s: the background process stopped ticking (still %q):\n%s", when, first, processes(t, sb))
		}
	}
}

// layerTemps lists the capture temp files (internal/snapshot: .layer-*.tar.zst) in the test
// daemon's layer cache.
func layerTemps(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(d.StateDir, "data", "layers", ".layer-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// assertAdoptedRunning checks, before anything could start it again, that sandbox id is
// recorded running, was re-adopted by the restart (audit), and that its container is not left
// paused.
func assertAdoptedRunning(t *testing.T, id string, auditBefore int) {
	t.Helper()
	info, err := d.Client().GetSandbox(ctxT(t, time.Minute), id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != client.StatusRunning {
		t.Fatalf("%s after the restart: status %q; want running (re-adopted, its processes kept)\n%s", id, info.Status, d.LogTail())
	}
	if r := findAudit(auditLog(t, d.StateDir), auditBefore, "sandbox.recovered", id, "hutchd"); r == nil || r["outcome"] != "adopted" {
		t.Errorf("audit record of recovering %s = %v; want outcome adopted", id, r)
	}
	if st := runcContainers(t)[id]; st != "running" {
		t.Fatalf("%s's container is %q after the restart; want running", id, st)
	}
}

// TestRecoveryKill9DuringSnapshot kills hutchd while a snapshot's capture holds the sandbox
// frozen, on each runtime. The restart must thaw and re-adopt the sandbox (its background
// process runs on), roll the capture back (no temp file of it left, no snapshot of it listed),
// and a new snapshot must work.
func TestRecoveryKill9DuringSnapshot(t *testing.T) {
	requireEnv(t)
	for _, rt := range captureRuntimes() {
		t.Run(rt, func(t *testing.T) {
			id := "e2e-rec-snap-" + rt
			sb := sandbox(t, id, &client.SandboxOptions{InstanceType: "basic", Runtime: rt})
			ticking := startTicker(t, sb)
			before, err := d.Client().ListSnapshots(ctxT(t, time.Minute), id)
			if err != nil {
				t.Fatal(err)
			}
			killWhilePaused(t, id, sb, func(ctx context.Context) {
				_, _ = sb.Snapshot(ctx)
			})
			auditBefore := len(auditLog(t, d.StateDir))
			if err := d.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			assertAdoptedRunning(t, id, auditBefore)
			ticking("after the restart")
			if left := layerTemps(t); len(left) > 0 {
				t.Errorf("the interrupted capture left temp files: %v", left)
			}
			after, err := d.Client().ListSnapshots(ctxT(t, time.Minute), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before) {
				t.Errorf("snapshots of %s: %d before, %d after the interrupted one; want it rolled back", id, len(before), len(after))
			}
			mustExec(t, sb, "rm /workspace/bulk && echo again > /workspace/again.txt")
			snap, err := sb.Snapshot(ctxT(t, 5*time.Minute))
			if err != nil {
				t.Fatalf("a snapshot after the restart: %v\n%s", err, d.LogTail())
			}
			t.Cleanup(func() { d.Client().DeleteSnapshot(ctxT(t, time.Minute), snap.ID) })
			ticking("after the new snapshot")
		})
	}
}

// TestRecoveryKill9DuringFork kills hutchd while a fork's capture holds its source frozen, on
// each runtime. The restart must leave the source running with its background process, no
// fork half-made (no record of the fork's IDs), and a new fork must work.
func TestRecoveryKill9DuringFork(t *testing.T) {
	requireEnv(t)
	for _, rt := range captureRuntimes() {
		t.Run(rt, func(t *testing.T) {
			id := "e2e-rec-fork-" + rt
			forkID := id + "-f1"
			sb := sandbox(t, id, &client.SandboxOptions{InstanceType: "basic", Runtime: rt})
			t.Cleanup(func() { d.Client().SandboxHandle(forkID).Destroy(ctxT(t, time.Minute)) })
			ticking := startTicker(t, sb)
			killWhilePaused(t, id, sb, func(ctx context.Context) {
				_, _ = sb.Fork(ctx, 1, &client.ForkOptions{IDs: []string{forkID}})
			})
			auditBefore := len(auditLog(t, d.StateDir))
			if err := d.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			assertAdoptedRunning(t, id, auditBefore)
			ticking("after the restart")
			list, err := d.Client().ListSandboxes(ctxT(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(list, func(s client.SandboxInfo) bool { return s.ID == forkID }); i >= 0 {
				t.Errorf("the fork cut short during its capture left a record: %+v", list[i])
			}
			if left := layerTemps(t); len(left) > 0 {
				t.Errorf("the interrupted capture left temp files: %v", left)
			}
			mustExec(t, sb, "rm /workspace/bulk && echo forked > /workspace/fork.txt")
			res, err := sb.Fork(ctxT(t, 5*time.Minute), 1, &client.ForkOptions{IDs: []string{forkID}})
			if err != nil {
				t.Fatalf("a fork after the restart: %v\n%s", err, d.LogTail())
			}
			t.Cleanup(func() { d.Client().DeleteSnapshot(ctxT(t, time.Minute), res.Snapshot.ID) })
			if got := mustExec(t, d.Client().SandboxHandle(forkID), "cat /workspace/fork.txt"); got != "forked\n" {
				t.Fatalf("the fork reads %q", got)
			}
			ticking("after the new fork")
		})
	}
}

// TestRecoveryKill9DuringForkCreate kills hutchd after a fork's snapshot, while its sandboxes
// are being created. The caller got no answer, so the restart rolls the fork back: the forks
// made so far are destroyed (the fork journal), the source runs on with its background
// process, and the same fork works again.
func TestRecoveryKill9DuringForkCreate(t *testing.T) {
	requireEnv(t)
	id := "e2e-rec-forkc"
	forks := []string{id + "-f1", id + "-f2"}
	sb := sandbox(t, id, &client.SandboxOptions{InstanceType: "lite"})
	t.Cleanup(func() {
		for _, f := range forks {
			d.Client().SandboxHandle(f).Destroy(ctxT(t, time.Minute))
		}
	})
	ticking := startTicker(t, sb)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = sb.Fork(context.Background(), len(forks), &client.ForkOptions{IDs: forks}) // the daemon dies under it
	}()
	if !testutil.Poll(t, time.Millisecond, time.Minute, func() bool {
		if anyNetns(forks) {
			return true
		}
		select {
		case <-done:
			t.Fatalf("the fork ended before a fork's network namespace was seen\n%s", d.LogTail())
		default:
		}
		return false
	}) {
		t.Fatalf("no fork's network namespace was seen\n%s", d.LogTail())
	}
	d.Kill9()
	<-done
	auditBefore := len(auditLog(t, d.StateDir))
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertAdoptedRunning(t, id, auditBefore)
	ticking("after the restart")
	list, err := d.Client().ListSandboxes(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, sbi := range list {
		if slices.Contains(forks, sbi.ID) {
			t.Errorf("the fork cut short left sandbox %s (%s); want it rolled back", sbi.ID, sbi.Status)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(d.StateDir, "data", "forks")); len(ents) > 0 {
		t.Errorf("fork journal left after recovery: %v", ents)
	}
	res, err := sb.Fork(ctxT(t, 5*time.Minute), len(forks), &client.ForkOptions{IDs: forks})
	if err != nil {
		t.Fatalf("the fork again after the restart: %v\n%s", err, d.LogTail())
	}
	t.Cleanup(func() { d.Client().DeleteSnapshot(ctxT(t, time.Minute), res.Snapshot.ID) })
	for _, f := range forks {
		if got := mustExec(t, d.Client().SandboxHandle(f), "hostname"); got != f+"\n" {
			t.Fatalf("hostname in %s = %q", f, got)
		}
	}
	ticking("after the fork")
}

// memoryValueServer serves, on 127.0.0.1:8124 inside the sandbox, a random value it made at
// start and keeps only in its memory: a fresh start of the sandbox cannot give it back.
const memoryValueServer = `import http.server, secrets
v = secrets.token_hex(16).encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(v)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 8124), H).serve_forever()
`

const memoryValueGet = `python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:8124/", timeout=5).read().decode())'`

// restoreCommands returns the PIDs of the `runsc restore` commands of sandbox id that run on
// the host (the CLI, not the sandbox it makes).
func restoreCommands(id string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) == "runsc" && slices.Contains(args, "restore") &&
			slices.ContainsFunc(args, func(a string) bool { return strings.HasSuffix(a, "/"+id) }) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestRecoveryKill9DuringMemoryWake kills hutchd while a gVisor sandbox's wake restores it
// from its memory image; in the second case the `runsc restore` dies too (as on a host whose
// processes all die), so no restore finishes. The restart must not lose the image: the
// sandbox ends up running from it (its finished restore adopted, or the image kept for the
// next wake), and a process's in-memory value is the one it held before the sleep.
func TestRecoveryKill9DuringMemoryWake(t *testing.T) {
	requireEnv(t)
	requireCheckpoint(t)
	for _, c := range []struct {
		name        string
		killRestore bool
	}{{"restore goes on", false}, {"restore killed too", true}} {
		t.Run(c.name, func(t *testing.T) {
			id := "e2e-rec-wake"
			if c.killRestore {
				id = "e2e-rec-wake-k"
			}
			sb := sandbox(t, id, &client.SandboxOptions{Runtime: "gvisor"})
			mustExec(t, sb, "cat > /tmp/value.py <<'EOF'\n"+memoryValueServer+"EOF")
			if _, err := sb.StartProcess(ctxT(t, time.Minute), "python3 /tmp/value.py", client.ProcessOptions{ID: "value"}); err != nil {
				t.Fatal(err)
			}
			var (
				answer *client.ExecResult
				askErr error
			)
			if !testutil.Poll(t, 200*time.Millisecond, time.Minute, func() bool {
				answer, askErr = sb.Exec(ctxT(t, time.Minute), memoryValueGet, nil)
				return askErr == nil && answer.ExitCode == 0
			}) {
				t.Fatalf("the value server does not answer: %v %+v", askErr, answer)
			}
			want := strings.TrimSpace(string(answer.Stdout))
			info, err := sb.Sleep(ctxT(t, 5*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if info.SleepMode != "memory" {
				t.Fatalf("sleep kept %q (%s); want memory", info.SleepMode, info.SleepNote)
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = sb.Wake(context.Background()) // the daemon dies under it
			}()
			var restores []int
			if !testutil.Poll(t, time.Millisecond, time.Minute, func() bool { restores = restoreCommands(id); return len(restores) > 0 }) {
				t.Fatalf("no runsc restore of %s was seen\n%s", id, d.LogTail())
			}
			d.Kill9()
			if c.killRestore {
				for _, pid := range restores {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			wg.Wait()
			if err := d.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			info, err = sb.Info(ctxT(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("after the restart: status %q, sleepMode %q, sleepNote %q", info.Status, info.SleepMode, info.SleepNote)
			if info.Status != client.StatusRunning && !(info.Status == client.StatusSleeping && info.SleepMode == "memory") {
				t.Fatalf("after the restart: status %q, sleepMode %q, sleepNote %q; want running from the image, or asleep with it\n%s",
					info.Status, info.SleepMode, info.SleepNote, d.LogTail())
			}
			res, err := sb.Exec(ctxT(t, 5*time.Minute), memoryValueGet, nil) // wakes it if asleep
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(res.Stdout)); res.ExitCode != 0 || got != want {
				t.Fatalf("the in-memory value after the restart = %q (exit %d, %s); want %q: the process did not survive\n%s",
					got, res.ExitCode, res.Stderr, want, d.LogTail())
			}
			if _, err := os.Stat(filepath.Join(d.StateDir, "data", "sandboxes", id, "memory")); err == nil {
				t.Errorf("the memory image is still there once the sandbox runs from it")
			}
		})
	}
}
