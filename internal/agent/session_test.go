package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/testutil"
)

func TestSessionCreateListDelete(t *testing.T) {
	a := startAgent(t)
	out := a.mustPost("/api/session/create", obj{"id": "s1", "env": obj{"A": "1"}, "cwd": "/tmp"})
	if out["id"] != "s1" || out["cwd"] != "/tmp" {
		t.Fatalf("create = %v", out)
	}
	status, eout := a.post("/api/session/create", obj{"id": "s1"})
	wantError(t, status, eout, 409, "SESSION_ALREADY_EXISTS")
	status, eout = a.post("/api/session/create", obj{"id": "no spaces"})
	wantError(t, status, eout, 400, "VALIDATION_FAILED")
	status, eout = a.post("/api/session/create", obj{"id": strings.Repeat("a", 129)})
	wantError(t, status, eout, 400, "VALIDATION_FAILED")
	auto := a.mustPost("/api/session/create", nil)
	if !strings.HasPrefix(auto["id"].(string), "session-") || auto["cwd"] != a.workdir {
		t.Fatalf("create without id = %v", auto)
	}
	if out := a.exec(obj{"command": "echo $A; pwd", "sessionId": "s1"}); out["stdout"] != "1\n/tmp\n" {
		t.Fatalf("session env/cwd = %v", out)
	}
	_ = a.exec(obj{"command": "true"}) // creates default lazily
	status, list := a.do("GET", "/api/session/list", nil)
	if status != 200 {
		t.Fatalf("list = %d", status)
	}
	var ids []string
	for _, s := range list["sessions"].([]any) {
		ids = append(ids, s.(obj)["id"].(string))
	}
	if got := strings.Join(ids, ","); got != fmt.Sprintf("default,s1,%s", auto["id"]) {
		t.Fatalf("sessions = %s", got)
	}
	a.mustPost("/api/session/delete", obj{"sessionId": "s1"})
	status, eout = a.post("/api/session/delete", obj{"sessionId": "s1"})
	wantError(t, status, eout, 404, "SESSION_NOT_FOUND")
	status, eout = a.post("/api/session/delete", obj{"sessionId": "default"})
	wantError(t, status, eout, 400, "SESSION_DEFAULT_UNDELETABLE")
	// An unknown session is created on first use, with a fresh state.
	if out := a.exec(obj{"command": "echo ${A-unset}; pwd", "sessionId": "s1"}); out["stdout"] != "unset\n"+a.workdir+"\n" {
		t.Fatalf("recreated session = %v", out)
	}
}

func TestSessionIsolation(t *testing.T) {
	a := startAgent(t)
	a.exec(obj{"command": "cd /tmp && export XA=1 && export HUTCH_TEST_BASE=changed", "sessionId": "a"})
	if out := a.exec(obj{"command": `pwd; echo "${XA-unset} $HUTCH_TEST_BASE"`, "sessionId": "b"}); out["stdout"] != a.workdir+"\nunset 1\n" {
		t.Fatalf("session b sees %q", out["stdout"])
	}
	if out := a.exec(obj{"command": `pwd; echo "${XA-unset} $HUTCH_TEST_BASE"`}); out["stdout"] != a.workdir+"\nunset 1\n" {
		t.Fatalf("default session sees %q", out["stdout"])
	}
	if out := a.exec(obj{"command": `pwd; echo "$XA $HUTCH_TEST_BASE"`, "sessionId": "a"}); out["stdout"] != "/tmp\n1 changed\n" {
		t.Fatalf("session a lost its state: %q", out["stdout"])
	}
	// unset persists too; shell variables that are not exported do not.
	a.exec(obj{"command": "unset XA; LOCALVAR=x", "sessionId": "a"})
	if out := a.exec(obj{"command": `echo "${XA-unset} ${LOCALVAR-unset}"`, "sessionId": "a"}); out["stdout"] != "unset unset\n" {
		t.Fatalf("after unset: %q", out["stdout"])
	}
	// State is saved even when the command fails or exits early.
	a.exec(obj{"command": "export EARLY=1; cd /; exit 7", "sessionId": "a"})
	if out := a.exec(obj{"command": `echo "$EARLY"; pwd`, "sessionId": "a"}); out["stdout"] != "1\n/\n" {
		t.Fatalf("after exit 7: %q", out["stdout"])
	}
	// A broken PATH does not lose the state either.
	a.exec(obj{"command": "export KEEP=yes; export PATH=/nonexistent", "sessionId": "p"})
	if out := a.exec(obj{"command": `echo "$KEEP $PATH"`, "sessionId": "p"}); out["stdout"] != "yes /nonexistent\n" {
		t.Fatalf("after PATH change: %q", out["stdout"])
	}
	// Values with newlines and '=' survive.
	a.exec(obj{"command": "export ML=$'a\\nb=c'", "sessionId": "a"})
	if out := a.exec(obj{"command": `printf '%s' "$ML"`, "sessionId": "a"}); out["stdout"] != "a\nb=c" {
		t.Fatalf("multi-line value = %q", out["stdout"])
	}
	// The marker never leaks into the session state.
	if out := a.exec(obj{"command": "env | grep -c '^HUTCH_EXEC_ID=' ; true"}); out["stdout"] != "1\n" {
		t.Fatalf("marker count = %q", out["stdout"])
	}
}

func TestPerCommandEnvAndCwd(t *testing.T) {
	a := startAgent(t)
	sub := filepath.Join(a.workdir, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	a.exec(obj{"command": "export KEPT=session"})
	out := a.exec(obj{"command": `echo "$ONCE $KEPT"; pwd`, "env": obj{"ONCE": "1", "KEPT": "cmd"}, "cwd": "sub"})
	if out["stdout"] != "1 cmd\n"+sub+"\n" {
		t.Fatalf("per-command env/cwd = %q", out["stdout"])
	}
	if out := a.exec(obj{"command": `echo "${ONCE-unset} $KEPT"; pwd`}); out["stdout"] != "unset session\n"+a.workdir+"\n" {
		t.Fatalf("per-command env/cwd persisted: %q", out["stdout"])
	}
	// Changes the command makes itself do persist.
	a.exec(obj{"command": "export ONCE=changed; cd deeper", "env": obj{"ONCE": "1"}, "cwd": "sub"})
	if out := a.exec(obj{"command": `echo "$ONCE"; pwd`}); out["stdout"] != "changed\n"+filepath.Join(sub, "deeper")+"\n" {
		t.Fatalf("command's own changes lost: %q", out["stdout"])
	}
}

func TestSessionsRunInParallel(t *testing.T) {
	a := startAgent(t)
	flag := filepath.Join(a.workdir, "flag")
	var wg sync.WaitGroup
	var waited obj
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, waited = a.post("/api/execute", obj{
			"command":   fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; echo seen", flag),
			"sessionId": "waiter", "timeoutMs": 20000,
		})
	}()
	time.Sleep(200 * time.Millisecond)
	a.exec(obj{"command": "touch " + flag, "sessionId": "toucher"})
	wg.Wait()
	if waited["stdout"] != "seen\n" {
		t.Fatalf("waiter = %v; sessions did not run in parallel", waited)
	}
}

func TestSessionSerialisesCommands(t *testing.T) {
	a := startAgent(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.exec(obj{"command": fmt.Sprintf("echo start%d >> log; sleep 0.2; echo end%d >> log", i, i), "sessionId": "ser"})
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(filepath.Join(a.workdir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != 8 {
		t.Fatalf("log = %q", b)
	}
	for i := 0; i < len(lines); i += 2 {
		if strings.TrimPrefix(lines[i], "start") != strings.TrimPrefix(lines[i+1], "end") {
			t.Fatalf("commands of one session overlapped: %q", b)
		}
	}
}

func TestSessionDeleteKillsRunningCommand(t *testing.T) {
	a := startAgent(t)
	a.mustPost("/api/session/create", obj{"id": "victim"})
	mark := randomMark()
	resp := a.openStream(context.Background(), "/api/execute/stream", obj{
		"command": "echo go; sleep 300", "sessionId": "victim", "env": obj{"TESTMARK": mark},
	})
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	var evs []event
	done := make(chan struct{})
	go func() {
		defer close(done)
		evs = readEvents(t, r)
	}()
	// The sleep carries TESTMARK (bash itself does not when it is a warm shell, which exports
	// the per-command env after it started).
	testutil.Poll(t, 20*time.Millisecond, 10*time.Second, func() bool { return len(session.FindMarked("TESTMARK", mark)) >= 1 })
	a.mustPost("/api/session/delete", obj{"sessionId": "victim"})
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("stream did not end after session delete")
	}
	last := evs[len(evs)-1]
	if last["type"] != "error" || last["code"] != "SESSION_NOT_FOUND" {
		t.Fatalf("last event = %v; want error SESSION_NOT_FOUND", last)
	}
	if pids := session.FindMarked("TESTMARK", mark); len(pids) != 0 {
		t.Fatalf("processes left after session delete: %v", pids)
	}
}
