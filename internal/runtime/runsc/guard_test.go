package runsc

import "testing"

func TestPickGroup(t *testing.T) {
	agent := []psEntry{
		{PID: 1, PPID: 0, PGID: 1, Cmd: "hutch-init"},
		{PID: 7, PPID: 1, PGID: 7, Cmd: "hutch-init"}, // the agent server, in a group of its own
	}
	for _, tc := range []struct {
		name    string
		ps      []psEntry
		pgid, n int
	}{
		{"only the agent", agent, 0, 0},
		{"a fork bomb", append(append([]psEntry{}, agent...),
			psEntry{PID: 20, PPID: 7, PGID: 20, Cmd: "hutch-init"}, // a command's shim
			psEntry{PID: 21, PPID: 20, PGID: 20, Cmd: "bash"},
			psEntry{PID: 22, PPID: 21, PGID: 20, Cmd: "python3"},
			psEntry{PID: 23, PPID: 22, PGID: 20, Cmd: "python3"},
			psEntry{PID: 30, PPID: 7, PGID: 30, Cmd: "hutch-init"},
			psEntry{PID: 31, PPID: 30, PGID: 30, Cmd: "sleep"},
		), 20, 4},
		{"processes in PID 1's group are the agent's", append(append([]psEntry{}, agent...),
			psEntry{PID: 40, PPID: 1, PGID: 1, Cmd: "sh"},
			psEntry{PID: 41, PPID: 1, PGID: 1, Cmd: "sh"},
			psEntry{PID: 50, PPID: 7, PGID: 50, Cmd: "sleep"},
		), 50, 1},
		{"a later hutch-init child of PID 1 is not the agent", append(append([]psEntry{}, agent...),
			psEntry{PID: 90, PPID: 1, PGID: 90, Cmd: "hutch-init"},
			psEntry{PID: 91, PPID: 90, PGID: 90, Cmd: "python3"},
		), 90, 2},
		{"a tie goes to the older group", append(append([]psEntry{}, agent...),
			psEntry{PID: 60, PPID: 7, PGID: 60, Cmd: "a"},
			psEntry{PID: 50, PPID: 7, PGID: 50, Cmd: "b"},
		), 50, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pgid, n, err := pickGroup(tc.ps)
			if err != nil || pgid != tc.pgid || n != tc.n {
				t.Errorf("pickGroup = %d, %d, %v; want %d, %d", pgid, n, err, tc.pgid, tc.n)
			}
		})
	}
}

func TestGuardTrigger(t *testing.T) {
	// The instance types' memory and pids (internal/sandbox), and extremes.
	for _, c := range []struct{ limit, pids int64 }{
		{256 << 20, 512}, {1 << 30, 1024}, {4 << 30, 2048}, {6 << 30, 4096}, {8 << 30, 4096}, {12 << 30, 8192},
		{64 << 20, 64}, {64 << 30, 64},
	} {
		host := SentryMemory(c.limit, c.pids)
		tr := guardTrigger(host)
		// Above the sandbox's own limit (where the agent kills), with room for the Sentry's
		// base memory; below the host limit, with room for a kill to take effect.
		if tr < c.limit+64<<20 || host-tr < 64<<20 {
			t.Errorf("limit %d MiB, %d pids: trigger %d MiB, host limit %d MiB", c.limit>>20, c.pids, tr>>20, host>>20)
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
	want := []psEntry{{PID: 1, PPID: 0, PGID: 1, Cmd: "hutch-init"}, {PID: 22, PPID: 7, PGID: 20, Cmd: "python3"}}
	if len(ps) != len(want) || ps[0] != want[0] || ps[1] != want[1] {
		t.Fatalf("parsePS = %+v; want %+v", ps, want)
	}
	for _, bad := range []string{"", "PID CMD\n", "UID PID PPID PGID C TTY STIME TIME CMD\n0 x 0 1 0 ? 09:44 1ms sh\n"} {
		if _, err := parsePS([]byte(bad)); err == nil {
			t.Errorf("parsePS(%q) accepted", bad)
		}
	}
}
