package agent

import (
	"fmt"
	"os"
	"testing"
)

// TestMain gives the tests' shells an empty HOME: the interactive bash of terminals and
// sessions reads ~/.bashrc, and a host user's rc file (a version manager's init, say) can take
// tens of seconds or hang, which would fail these tests for reasons outside the agent.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "hutch-test-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("HOME", home)
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}
