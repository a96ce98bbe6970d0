package rootfs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IsMounted reports whether path is a mountpoint in this process's mount namespace, by reading
// /proc/self/mountinfo. path is cleaned and made absolute; symlinks are not resolved.
func IsMounted(path string) (bool, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return false, fmt.Errorf("rootfs: %w", err)
	}
	points, err := mountpoints()
	if err != nil {
		return false, err
	}
	for _, m := range points {
		if m == p {
			return true, nil
		}
	}
	return false, nil
}

// ListMounts returns the mountpoints at or below prefix (an absolute directory), deepest first
// and without duplicates, so unmounting them in order never hits a busy parent. It is meant for
// leak checks in tests and for cleanup after a crash.
func ListMounts(prefix string) ([]string, error) {
	p, err := filepath.Abs(prefix)
	if err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	points, err := mountpoints()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range points {
		if (m == p || strings.HasPrefix(m, p+"/") || p == "/") && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		di, dj := strings.Count(out[i], "/"), strings.Count(out[j], "/")
		if di != dj {
			return di > dj
		}
		return out[i] > out[j]
	})
	return out, nil
}

// mountpoints returns field 5 (the mount point) of every line of /proc/self/mountinfo, in file
// order, with octal escapes (\040 for space, …) decoded.
func mountpoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, unescape(fields[4]))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rootfs: read mountinfo: %w", err)
	}
	return out, nil
}

// UnescapeMountinfo decodes the \NNN octal escapes (\040 for a space, …) the kernel uses in
// /proc/self/mountinfo fields.
func UnescapeMountinfo(s string) string { return unescape(s) }

// unescape decodes the \NNN octal escapes the kernel uses in mountinfo paths.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
