package sandbox

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/store"
)

func TestShouldSleep(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tests := []struct {
		name string
		s    idleState
		want bool
	}{
		{"idle long enough", idleState{lastActive: now.Add(-30 * time.Second), sleepAfter: 30 * time.Second}, true},
		{"idle longer", idleState{lastActive: now.Add(-time.Hour), sleepAfter: 30 * time.Second}, true},
		{"not yet", idleState{lastActive: now.Add(-29 * time.Second), sleepAfter: 30 * time.Second}, false},
		{"keepAlive", idleState{lastActive: now.Add(-time.Hour), sleepAfter: time.Second, keepAlive: true}, false},
		{"held", idleState{lastActive: now.Add(-time.Hour), sleepAfter: time.Second, holds: 1}, false},
		{"activity in the future (clock step)", idleState{lastActive: now.Add(time.Minute), sleepAfter: time.Second}, false},
		{"no setting", idleState{lastActive: now.Add(-time.Hour)}, false},
	}
	for _, tt := range tests {
		if got := shouldSleep(now, tt.s); got != tt.want {
			t.Errorf("%s: shouldSleep = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseSleepAfter(t *testing.T) {
	good := map[string]time.Duration{
		"10m": 10 * time.Minute, "30s": 30 * time.Second, "1h30m": 90 * time.Minute,
		"1": time.Second, "90": 90 * time.Second, "1.5": 1500 * time.Millisecond, " 2s ": 2 * time.Second,
		"8760h": MaxSleepAfter,
	}
	for in, want := range good {
		got, err := ParseSleepAfter(in)
		if err != nil || got != want {
			t.Errorf("ParseSleepAfter(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Each refusal names the value sent (a number out of range used to be reported as -1ns).
	for _, tc := range []struct{ in, msg string }{
		{"", `""`}, {"0", "sleepAfter 0 (seconds) is outside"}, {"0s", "sleepAfter 0s is outside"},
		{"never", `"never"`}, {"-5", "sleepAfter -5 (seconds) is outside"}, {"-1m", "sleepAfter -1m is outside"},
		{"999ms", "sleepAfter 999ms is outside"}, {"0.5", "sleepAfter 0.5 (seconds)"}, {"8761h", "sleepAfter 8761h is outside"},
		{"NaN", "sleepAfter NaN (seconds)"}, {"Inf", "sleepAfter Inf (seconds)"}, {"1e30", "sleepAfter 1e30 (seconds)"},
		{"1e300", "sleepAfter 1e300 (seconds)"}, {"1e400", "sleepAfter 1e400 (seconds)"}, {"-1e300", "sleepAfter -1e300 (seconds)"},
		{"10 minutes", `"10 minutes"`}, {"99999999999h", `"99999999999h"`},
	} {
		d, err := ParseSleepAfter(tc.in)
		if !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
			t.Errorf("ParseSleepAfter(%q) = %v, %v; want VALIDATION_FAILED", tc.in, d, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.msg) || strings.Contains(msg, "-1ns") {
			t.Errorf("ParseSleepAfter(%q): %q; want it to name the value sent (%q)", tc.in, msg, tc.msg)
		}
	}
}

func TestFormatSleepAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Minute: "10m", time.Hour: "1h", 90 * time.Minute: "1h30m", 30 * time.Second: "30s",
		1500 * time.Millisecond: "1.5s", time.Hour + time.Second: "1h0m1s",
	} {
		if got := FormatSleepAfter(d); got != want {
			t.Errorf("FormatSleepAfter(%v) = %q; want %q", d, got, want)
		}
		if back, err := ParseSleepAfter(FormatSleepAfter(d)); err != nil || back != d {
			t.Errorf("round trip of %v: %v, %v", d, back, err)
		}
	}
}

// TestIdleCandidates drives the reaper's choice over in-memory instances with an injected
// clock: holds, keepAlive and activity keep sandboxes awake; a release counts as activity.
func TestIdleCandidates(t *testing.T) {
	m := &Manager{instances: map[string]*instance{}, holds: map[string]int{}, sleeping: map[string]bool{}}
	add := func(id string, sleepAfter time.Duration, keepAlive bool) *instance {
		inst := newInstance(1, Net{}, nil, store.Sandbox{SleepAfter: sleepAfter, KeepAlive: keepAlive})
		m.instances[id] = inst
		return inst
	}
	add("idle", 3*time.Second, false)
	add("keep", 3*time.Second, true)
	add("held", 3*time.Second, false)
	add("slow", time.Hour, false)
	add("going", 3*time.Second, false)
	m.sleeping["going"] = true
	release := m.Hold("held")
	now := time.Now()
	if got := m.idleCandidates(now); len(got) != 0 {
		t.Fatalf("right after start: %v; want none", got)
	}
	later := now.Add(10 * time.Second)
	if got := m.idleCandidates(later); !slices.Equal(got, []string{"idle"}) {
		t.Fatalf("10 s later: %v; want [idle]", got)
	}
	release()
	release() // a second release is a no-op
	if m.holds["held"] != 0 {
		t.Fatalf("holds after release = %d", m.holds["held"])
	}
	// The release was activity: "held" is idle only sleepAfter after it.
	got := m.idleCandidates(time.Now().Add(2 * time.Second))
	if slices.Contains(got, "held") {
		t.Fatalf("2 s after release: %v; held must stay awake", got)
	}
	got = m.idleCandidates(time.Now().Add(4 * time.Second))
	slices.Sort(got)
	if !slices.Equal(got, []string{"held", "idle"}) {
		t.Fatalf("4 s after release: %v; want [held idle]", got)
	}
	// Switching keepAlive off re-arms: it counts from the change, not from the old activity.
	m.instances["keep"].setSleep(3*time.Second, false)
	m.instances["keep"].touch()
	if got := m.idleCandidates(time.Now().Add(time.Second)); slices.Contains(got, "keep") {
		t.Fatalf("right after keepAlive off: %v", got)
	}
	if got := m.idleCandidates(time.Now().Add(5 * time.Second)); !slices.Contains(got, "keep") {
		t.Fatalf("5 s after keepAlive off: %v; want keep", got)
	}
}

func TestSyncDir(t *testing.T) {
	if err := syncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := syncDir("/nonexistent/hutch-upper"); err != nil {
		t.Fatalf("missing dir: %v", err)
	}
}
