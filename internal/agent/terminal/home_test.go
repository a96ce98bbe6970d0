package terminal

import (
	"os"
	"testing"

	"github.com/hutchdev/hutch/internal/testutil"
)

// TestMain gives the tests' shells an empty HOME (testutil.RunWithEmptyHome).
func TestMain(m *testing.M) { os.Exit(testutil.RunWithEmptyHome(m)) }
