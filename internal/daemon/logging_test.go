package daemon

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/config"
)

// TestLogFileBoundedUnderFlood: with --log-file, a flood of lines with 60 KB values from
// hundreds of sandboxes (so the per-sandbox rate limit lets many through) leaves at most
// (1+LogFiles)×LogMaxBytes on disk, in LogFiles+1 files, every value cut.
func TestLogFileBoundedUnderFlood(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Defaults()
	cfg.LogFile = filepath.Join(dir, "hutchd.log")
	cfg.LogMaxBytes, cfg.LogFiles = 64<<10, 2
	log, err := OpenLog(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	target := "http://example.com/" + strings.Repeat("A", 60_000)
	for i := range 20_000 {
		log.With("component", "egress", "sandbox_id", "sb"+strconv.Itoa(i%500), "host", target[7:]).
			Info("egress: absolute-form request target refused", "target", target)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
		if len(b) > cfg.LogMaxBytes {
			t.Errorf("%s: %d bytes; want at most %d", e.Name(), len(b), cfg.LogMaxBytes)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if len(line) > 4<<10 {
				t.Fatalf("%s: a line of %d bytes; values should be cut at %d", e.Name(), len(line), cfg.LogValueMaxBytes)
			}
		}
	}
	if len(entries) != 1+cfg.LogFiles || total > (1+cfg.LogFiles)*cfg.LogMaxBytes {
		t.Errorf("%d files, %d bytes; want %d files, at most %d bytes", len(entries), total, 1+cfg.LogFiles, (1+cfg.LogFiles)*cfg.LogMaxBytes)
	}
}
