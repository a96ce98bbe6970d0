package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/agent/reaper"
)

// priorityPy prints, from a command: its nice value and oom_score_adj, whether it may lower
// its nice value, take a real-time class or raise RLIMIT_NICE or RLIMIT_RTPRIO, and those
// limits, as "key=value" words ("ok" when the call succeeded, else the errno's name).
const priorityPy = `import errno, os, resource
def try_(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    except ValueError:  # setrlimit's EPERM
        return "EPERM"
out = ["nice=%d" % os.getpriority(os.PRIO_PROCESS, 0), "oom=" + open("/proc/self/oom_score_adj").read().strip()]
out.append("renice18=" + try_(lambda: os.setpriority(os.PRIO_PROCESS, 0, 18)))
out.append("fifo=" + try_(lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))))
out.append("rr=" + try_(lambda: os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))))
out.append("rlnice=%d/%d" % resource.getrlimit(resource.RLIMIT_NICE))
out.append("rlrtprio=%d/%d" % resource.getrlimit(resource.RLIMIT_RTPRIO))
out.append("raisenice=" + try_(lambda: resource.setrlimit(resource.RLIMIT_NICE, (40, 40))))
out.append("raisertprio=" + try_(lambda: resource.setrlimit(resource.RLIMIT_RTPRIO, (99, 99))))
print(" ".join(out))
`

// agentPrioPy lowers the command's own oom_score_adj, then renices the agent's server
// (hutch-init serve) to 19 and raises its oom_score_adj to 1000, and prints what happened:
// what a command can do to the agent's priority (api/agent.md says so).
const agentPrioPy = `import errno, os
def try_(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def wr(path, v):
    with open(path, "w") as f:
        f.write(v)
out = ["lowerown=" + try_(lambda: wr("/proc/self/oom_score_adj", "0"))]
server = 0
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            argv = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[0].endswith(b"hutch-init") and argv[1] == b"serve":
            server = int(p)
out.append("server=%d" % server)
if server:
    out.append("reniceagent=" + try_(lambda: os.setpriority(os.PRIO_PROCESS, server, 19)))
    out.append("agentoom=" + try_(lambda: wr("/proc/%d/oom_score_adj" % server, "1000")))
print(" ".join(out))
`

// TestCommandPriority: a command runs at reaper.CommandNice and CommandOOMScoreAdj and cannot
// raise its CPU priority: no higher RLIMIT_NICE or RLIMIT_RTPRIO (pinned at 0 by the OCI
// spec) and, on runc, no lower nice value and no real-time class. The agent's own git (git/checkout) runs
// demoted too: a hook the sandbox configured records its priority. Last, it logs what a
// command can do to its own oom_score_adj and to the agent's priority, which api/agent.md and
// docs/SECURITY.md describe.
func TestCommandPriority(t *testing.T) {
	requireEnv(t)
	parallel(t)
	for _, rt := range testRuntimes() {
		t.Run(rt, func(t *testing.T) {
			requireRuntime(t, rt)
			sb := sandbox(t, "e2e-prio-"+rt, withRuntime(nil, rt))
			if err := sb.WriteFile(ctxT(t, time.Minute), "/tmp/prio.py", []byte(priorityPy)); err != nil {
				t.Fatal(err)
			}
			got := strings.Fields(mustExec(t, sb, "python3 /tmp/prio.py"))
			t.Logf("%s: %s", rt, strings.Join(got, " "))
			kv := map[string]string{}
			for _, w := range got {
				k, v, _ := strings.Cut(w, "=")
				kv[k] = v
			}
			if kv["nice"] != fmt.Sprint(reaper.CommandNice) || kv["oom"] != reaper.CommandOOMScoreAdj {
				t.Errorf("command at nice %s, oom_score_adj %s; want %d, %s", kv["nice"], kv["oom"], reaper.CommandNice, reaper.CommandOOMScoreAdj)
			}
			refused := []string{"raisenice", "raisertprio"}
			if rt == "runc" {
				// The Sentry schedules its tasks without regard for nice values or
				// scheduling classes: on gVisor they are logged above, not required.
				refused = append(refused, "renice18", "fifo", "rr")
			}
			for _, k := range refused {
				if kv[k] == "ok" || kv[k] == "" {
					t.Errorf("%s: %q; want refused", k, kv[k])
				}
			}
			if kv["rlnice"] != "0/0" || kv["rlrtprio"] != "0/0" {
				t.Errorf("RLIMIT_NICE %s, RLIMIT_RTPRIO %s; want 0/0", kv["rlnice"], kv["rlrtprio"])
			}

			// The agent's git: a post-checkout hook from the sandbox's global config.
			hook := "#!/bin/sh\necho \"$(cut -d' ' -f19 /proc/$$/stat) $(cat /proc/$$/oom_score_adj)\" > /tmp/prio-hook\n"
			if err := sb.WriteFile(ctxT(t, time.Minute), "/tmp/prio-hooks/post-checkout", []byte(hook)); err != nil {
				t.Fatal(err)
			}
			mustExec(t, sb, `set -e
chmod +x /tmp/prio-hooks/post-checkout
git init -q /tmp/prio-src
git -C /tmp/prio-src -c user.email=a@b -c user.name=a commit -q --allow-empty -m x
git config --global core.hooksPath /tmp/prio-hooks`)
			if _, err := sb.GitCheckout(ctxT(t, 2*time.Minute), "file:///tmp/prio-src", &client.GitCheckoutOptions{TargetDir: "/tmp/prio-clone"}); err != nil {
				t.Fatal(err)
			}
			ran := strings.Fields(mustExec(t, sb, "cat /tmp/prio-hook"))
			if want := []string{fmt.Sprint(reaper.CommandNice), reaper.CommandOOMScoreAdj}; strings.Join(ran, " ") != strings.Join(want, " ") {
				t.Errorf("the checkout's hook ran at nice and oom_score_adj %q; want %q", ran, want)
			}

			// Last: this changes the agent's priority for good.
			if err := sb.WriteFile(ctxT(t, time.Minute), "/tmp/agentprio.py", []byte(agentPrioPy)); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: a command against priorities: %s", rt, strings.TrimSpace(mustExec(t, sb, "python3 /tmp/agentprio.py")))
			mustExec(t, sb, "true") // the agent still answers
		})
	}
}
