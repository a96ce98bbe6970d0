package guard

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// liftCPUQuota raises id's CPU quota to one CPU, if it is lower, and returns the function
// that puts it back. runsc's control channel is served by the Sentry, which is throttled by
// that quota as a whole: in a lite sandbox (a sixteenth of a CPU) busy with a fork bomb, a
// pause took up to 3 s and `runsc kill` 4.5 s (once more than 10 s), while the bomb grew. One
// CPU, not none: the bomb runs as fast as the Sentry does while the kill is delivered, and on
// a host of many CPUs an unbounded Sentry would grow it many times as fast. While the quota is
// raised the sandbox still gets only its cpu.shares' part of a busy host.
func (s *Supervisor) liftCPUQuota(id string) (restore func()) {
	for _, dir := range s.cli.CgroupDirs(id) {
		for _, file := range []string{"cpu.cfs_quota_us", "cpu.max"} {
			path := filepath.Join(dir, file)
			old, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			period, _ := ocispec.ReadInt(filepath.Join(dir, "cpu.cfs_period_us")) // v1 only
			lifted := liftedQuota(file, string(old), period)
			if lifted == "" {
				return func() {}
			}
			if err := os.WriteFile(path, []byte(lifted), 0); err != nil {
				s.log.Warn("memory guard: lift the CPU quota", "sandbox_id", id, "err", err)
				return func() {}
			}
			return func() {
				if err := os.WriteFile(path, bytes.TrimSpace(old), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
					s.log.Warn("memory guard: restore the CPU quota", "sandbox_id", id, "err", err)
				}
			}
		}
	}
	return func() {}
}

// liftedQuota is what liftCPUQuota writes in place of old, the content of file: cgroup v1's
// cpu.cfs_quota_us (microseconds per period, -1 for none; period is cpu.cfs_period_us) or v2's
// cpu.max ("QUOTA PERIOD", QUOTA "max" for none). It is a quota of one CPU, or "" when old
// allows one CPU already or cannot be read.
func liftedQuota(file, old string, period int64) string {
	switch file {
	case "cpu.cfs_quota_us":
		q, err := strconv.ParseInt(strings.TrimSpace(old), 10, 64)
		if err != nil || q < 0 || period <= 0 || q >= period {
			return ""
		}
		return strconv.FormatInt(period, 10)
	case "cpu.max":
		f := strings.Fields(old)
		if len(f) != 2 || f[0] == "max" {
			return ""
		}
		q, err1 := strconv.ParseInt(f[0], 10, 64)
		p, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || p <= 0 || q >= p {
			return ""
		}
		return f[1] + " " + f[1]
	}
	return ""
}
