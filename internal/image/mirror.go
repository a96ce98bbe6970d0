package image

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
)

// aptSources are the host's apt source files that HostMirror reads: the one-line format and
// the deb822 format of Debian 12 and later. A variable for tests.
var aptSources = []string{"/etc/apt/sources.list", "/etc/apt/sources.list.d"}

// HostMirror returns the Debian mirror that the host's own apt configuration uses for suite:
// the URI of the first "deb" source that serves suite, else of the first that serves a base
// suite (one without a "-security"/"-updates" style suffix). A host that installs its packages
// from a mirror or a proxy builds its images from the same one.
func HostMirror(suite string) (string, error) {
	var srcs []aptSource
	for _, p := range aptSources {
		s, err := readAptSources(p)
		if err != nil {
			return "", err
		}
		srcs = append(srcs, s...)
	}
	for _, s := range srcs {
		if s.suite == suite {
			return s.uri, nil
		}
	}
	for _, s := range srcs {
		if !strings.Contains(s.suite, "-") && !strings.Contains(s.suite, "/") {
			return s.uri, nil
		}
	}
	return "", fmt.Errorf("no Debian mirror for %s in the host's apt sources (%s): %w", suite, strings.Join(aptSources, ", "), errdefs.ErrFailedPrecondition)
}

type aptSource struct{ uri, suite string }

// readAptSources reads a sources.list file, or every *.list and *.sources file of a
// sources.list.d directory in name order. A missing path holds no sources.
func readAptSources(path string) ([]aptSource, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("apt sources: %w", err)
	}
	if !fi.IsDir() {
		return readAptFile(path)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("apt sources: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources")) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []aptSource
	for _, n := range names {
		s, err := readAptFile(filepath.Join(path, n))
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}

func readAptFile(path string) ([]aptSource, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("apt sources: %w", err)
	}
	if strings.HasSuffix(path, ".sources") {
		return parseDeb822(string(b)), nil
	}
	return parseSourcesList(string(b)), nil
}

// parseSourcesList reads the one-line format: "deb [options] uri suite component...".
func parseSourcesList(text string) []aptSource {
	var out []aptSource
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) < 2 {
			continue
		}
		out = append(out, aptSource{uri: strings.TrimSuffix(f[0], "/"), suite: f[1]})
	}
	return out
}

// parseDeb822 reads the deb822 format: stanzas separated by blank lines, with Types, URIs and
// Suites fields (each a space-separated list); "Enabled: no" turns a stanza off.
func parseDeb822(text string) []aptSource {
	var out []aptSource
	fields := map[string]string{}
	flush := func() {
		defer clear(fields)
		if strings.EqualFold(fields["enabled"], "no") || !slices.Contains(strings.Fields(fields["types"]), "deb") {
			return
		}
		for _, u := range strings.Fields(fields["uris"]) {
			for _, s := range strings.Fields(fields["suites"]) {
				out = append(out, aptSource{uri: strings.TrimSuffix(u, "/"), suite: s})
			}
		}
	}
	var last string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
			last = ""
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}
