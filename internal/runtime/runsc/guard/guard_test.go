package guard

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPickGroup(t *testing.T) {
	agent := []Process{
		{PID: 1, PPID: 0, PGID: 1, Cmd: "hutch-init"},
		{PID: 7, PPID: 1, PGID: 7, Cmd: "hutch-init"}, // the agent server, in a group of its own
	}
	for _, tc := range []struct {
		name    string
		ps      []Process
		pgid, n int
	}{
		{"only the agent", agent, 0, 0},
		{"a fork bomb", append(append([]Process{}, agent...),
			Process{PID: 20, PPID: 7, PGID: 20, Cmd: "hutch-init"}, // a command's shim
			Process{PID: 21, PPID: 20, PGID: 20, Cmd: "bash"},
			Process{PID: 22, PPID: 21, PGID: 20, Cmd: "python3"},
			Process{PID: 23, PPID: 22, PGID: 20, Cmd: "python3"},
			Process{PID: 30, PPID: 7, PGID: 30, Cmd: "hutch-init"},
			Process{PID: 31, PPID: 30, PGID: 30, Cmd: "sleep"},
		), 20, 4},
		{"a group taken out (no live process): the next", append(append([]Process{}, agent...),
			Process{PID: 30, PPID: 7, PGID: 30, Cmd: "python3"},
		), 30, 1},
		{"processes in PID 1's group are the agent's", append(append([]Process{}, agent...),
			Process{PID: 40, PPID: 1, PGID: 1, Cmd: "sh"},
			Process{PID: 41, PPID: 1, PGID: 1, Cmd: "sh"},
			Process{PID: 50, PPID: 7, PGID: 50, Cmd: "sleep"},
		), 50, 1},
		{"a later hutch-init child of PID 1 is not the agent", append(append([]Process{}, agent...),
			Process{PID: 90, PPID: 1, PGID: 90, Cmd: "hutch-init"},
			Process{PID: 91, PPID: 90, PGID: 90, Cmd: "python3"},
		), 90, 2},
		{"a tie goes to the older group", append(append([]Process{}, agent...),
			Process{PID: 60, PPID: 7, PGID: 60, Cmd: "a"},
			Process{PID: 50, PPID: 7, PGID: 50, Cmd: "b"},
		), 50, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pgid, n := pickGroup(tc.ps)
			if pgid != tc.pgid || n != tc.n {
				t.Errorf("pickGroup = %d, %d; want %d, %d", pgid, n, tc.pgid, tc.n)
			}
		})
	}
}

func TestGuardTrigger(t *testing.T) {
	// The instance types' memory and pids (internal/sandbox), and extremes.
	for _, c := range []struct {
		limit, pids  int64
		instanceType bool
	}{
		{256 << 20, 512, true}, {1 << 30, 1024, true}, {4 << 30, 2048, true}, {6 << 30, 4096, true},
		{8 << 30, 4096, true}, {12 << 30, 8192, true},
		{64 << 20, 64, false}, {64 << 30, 64, false},
	} {
		host := SentryMemory(c.limit, c.pids)
		tr := guardTrigger(c.limit, host)
		// Above the sandbox's own limit (where the agent kills), with room for the Sentry's
		// base memory and ~0.45 MiB per task of half the pids limit; below the host limit,
		// with room for a kill to take effect: 180 MiB seen (a lite sandbox's python fork
		// bomb on a loaded host) and some more, 64 MiB for the extremes.
		room := int64(64 << 20)
		if c.instanceType {
			room = 224 << 20
		}
		if tr < c.limit+64<<20+c.pids/2*460<<10 || host-tr < room {
			t.Errorf("limit %d MiB, %d pids: trigger %d MiB, host limit %d MiB", c.limit>>20, c.pids, tr>>20, host>>20)
		}
	}
	// No limit of its own: 3/4 of the host's.
	if got := guardTrigger(0, 800); got != 600 {
		t.Errorf("guardTrigger(0, 800) = %d, want 600", got)
	}
}

func TestLiftedQuota(t *testing.T) {
	for _, c := range []struct {
		file, old string
		period    int64
		want      string
	}{
		{"cpu.cfs_quota_us", "6200\n", 100000, "100000"}, // lite: 62 millicpu
		{"cpu.cfs_quota_us", "100000\n", 100000, ""},     // one CPU already
		{"cpu.cfs_quota_us", "400000\n", 100000, ""},     // more
		{"cpu.cfs_quota_us", "-1\n", 100000, ""},         // none
		{"cpu.cfs_quota_us", "6200\n", 0, ""},            // no period read
		{"cpu.cfs_quota_us", "junk", 100000, ""},
		{"cpu.max", "6200 100000\n", 0, "100000 100000"},
		{"cpu.max", "max 100000\n", 0, ""},
		{"cpu.max", "200000 100000\n", 0, ""},
		{"cpu.max", "6200\n", 0, ""},
		{"cpu.weight", "100", 0, ""},
	} {
		if got := liftedQuota(c.file, c.old, c.period); got != c.want {
			t.Errorf("liftedQuota(%s, %q, %d) = %q, want %q", c.file, c.old, c.period, got, c.want)
		}
	}
}

func TestParsePS(t *testing.T) {
	out := "UID       PID       PPID      PGID      C         TTY       STIME     TIME       CMD\n" +
		"0         1         0         1         0         ?         09:44     10ms       hutch-init\n" +
		"0         22        7         20        3         pts/0     09:44     1.2s       python3\n"
	ps, err := parsePS([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{{PID: 1, PPID: 0, PGID: 1, CPU: 10 * time.Millisecond, Cmd: "hutch-init"}, {PID: 22, PPID: 7, PGID: 20, CPU: 1200 * time.Millisecond, Cmd: "python3"}}
	if len(ps) != len(want) || ps[0] != want[0] || ps[1] != want[1] {
		t.Fatalf("parsePS = %+v; want %+v", ps, want)
	}
	// A name with newlines (up to 15 bytes: runsc prints the executable's base name) adds lines
	// that are not processes; the table still reads.
	named := "UID PID PPID PGID C TTY STIME TIME CMD\n" +
		"0 1 0 1 0 ? 09:44 10ms hutch-init\n" +
		"0 40 1 40 0 ? 09:44 10ms x\n1 2 3 4 5 6 7\n" +
		"0 41 1 41 9 ? 09:44 3s python3\n" +
		"0 42 1 41 0 ? 09:44 ? python3\n"
	ps, err = parsePS([]byte(named))
	want = []Process{{PID: 1, PPID: 0, PGID: 1, CPU: 10 * time.Millisecond, Cmd: "hutch-init"}, {PID: 40, PPID: 1, PGID: 40, CPU: 10 * time.Millisecond, Cmd: "x"}, {PID: 41, PPID: 1, PGID: 41, CPU: 3 * time.Second, Cmd: "python3"}}
	// A TIME that is no duration counts as none.
	want = append(want, Process{PID: 42, PPID: 1, PGID: 41, Cmd: "python3"})
	if err != nil || len(ps) != len(want) || ps[0] != want[0] || ps[1] != want[1] || ps[2] != want[2] || ps[3] != want[3] {
		t.Fatalf("parsePS(a name with a newline) = %+v, %v; want %+v", ps, err, want)
	}
	for _, bad := range []string{"", "PID CMD\n", "UID PID PPID PGID C TTY STIME TIME CMD\n0 x 0 1 0 ? 09:44 1ms sh\n"} {
		if _, err := parsePS([]byte(bad)); err == nil {
			t.Errorf("parsePS(%q) accepted", bad)
		}
	}
}

// TestSignalledSet: processes a kill signalled and still listed later (zombies) are left out of
// the next choice; a PID no longer listed is forgotten, so its number may come back.
func TestSignalledSet(t *testing.T) {
	s := signalledSet{}
	decoy := []Process{{PID: 1, PGID: 1}, {PID: 10, PGID: 10}, {PID: 11, PGID: 10}, {PID: 12, PGID: 10}, {PID: 20, PGID: 20}}
	s.add(decoy, 10)
	// Still listed (zombies), with a bomb of two in group 30: the bomb is chosen.
	next := append(append([]Process{}, decoy...), Process{PID: 30, PGID: 30}, Process{PID: 31, PGID: 30})
	live := s.filter(next)
	if pgid, n := pickGroup(live); pgid != 30 || n != 2 {
		t.Errorf("after the decoy's kill: pickGroup = %d, %d; want the bomb, 30, 2", pgid, n)
	}
	// 11 and 12 reaped; 11 comes back as a new process.
	s.filter([]Process{{PID: 1, PGID: 1}, {PID: 10, PGID: 10}})
	if got := s.filter([]Process{{PID: 11, PGID: 11}}); len(got) != 1 {
		t.Errorf("a reused PID was left out: %v", got)
	}
	if s[10] {
		t.Error("PID 10, no longer listed, is still remembered")
	}
}

func TestSpread(t *testing.T) {
	many := func(groups, each int) []group {
		var gs []group
		for i := range groups {
			gs = append(gs, group{pgid: 100 + i, n: each})
		}
		return gs
	}
	for _, tc := range []struct {
		name   string
		groups []group
		want   bool
	}{
		{"none", nil, false},
		{"one fork bomb", []group{{pgid: 30, n: 250}, {pgid: 40, n: 3}}, false},
		{"a bomb with half the processes", []group{{pgid: 30, n: 40}, {pgid: 40, n: 20}, {pgid: 50, n: 20}}, false},
		{"a bomb of sessions", many(200, 1), true},
		{"a few groups of few", many(10, 2), false},
		{"a decoy and a bomb of sessions", append([]group{{pgid: 30, n: 100}}, many(150, 1)...), true},
		// byCPU's order: the largest group need not come first.
		{"the largest group last", append(many(10, 1), group{pgid: 30, n: 70}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(tc.groups) > 0 && spread(tc.groups); got != tc.want {
				t.Errorf("spread = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPidsGuard(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pidsMax   string // "" no file
		hint      int64
		minProcs  int
		wantFound bool
	}{
		{"lite", "1792\n", 640, 256, true}, // SentryPids(512)
		{"large", fmt.Sprintf("%d\n", SentryPids(4096)), 4224, 2048, true},
		{"small", fmt.Sprintf("%d\n", SentryPids(64)), 192, 32, true}, // above an idle Sentry's ~60 threads
		{"no limit", "max\n", 0, 0, false},
		{"no pids controller", "", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			memory, pids := t.TempDir(), t.TempDir()
			if tc.pidsMax != "" {
				if err := os.WriteFile(filepath.Join(pids, "pids.max"), []byte(tc.pidsMax), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			path, hint, minProcs := pidsGuard([]string{memory, pids})
			if hint != tc.hint || minProcs != tc.minProcs || (path == filepath.Join(pids, "pids.current")) != tc.wantFound {
				t.Errorf("pidsGuard = %q, %d, %d; want hint %d, %d processes", path, hint, minProcs, tc.hint, tc.minProcs)
			}
		})
	}
}
