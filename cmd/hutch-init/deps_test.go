package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var updateDeps = flag.Bool("update", false, "rewrite deps.txt from the current build")

// depsEnv is the build hutch-init ships as (static, linux/amd64), so that the list does not
// change with the machine that runs the test.
var depsEnv = []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}

const depsHeader = `# The packages linked into hutch-init (go list -deps, CGO_ENABLED=0 GOOS=linux GOARCH=amd64).
# hutch-init is PID 1 of every sandbox and runs in its memory: a new entry here is a cost that
# every sandbox pays, and a host package here would put host code inside the sandbox.
# TestDeps fails when this list differs from the build; after a deliberate change, regenerate:
#   go test ./cmd/hutch-init -run TestDeps -update
`

// TestDeps compares the packages hutch-init links with the committed deps.txt (the idea of
// tailscale's depaware): a dependency that grows PID 1 shows up in review.
func TestDeps(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Standard}}std {{end}}{{.ImportPath}}", ".")
	cmd.Env = append(os.Environ(), depsEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var mods, std []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, ok := strings.CutPrefix(line, "std "); ok {
			std = append(std, p)
		} else {
			mods = append(mods, line)
		}
	}
	slices.Sort(mods)
	slices.Sort(std)
	want := depsHeader + "\n# Modules and this repository\n" + strings.Join(mods, "\n") +
		"\n\n# Standard library\n" + strings.Join(std, "\n") + "\n"

	if *updateDeps {
		if err := os.WriteFile("deps.txt", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("deps.txt")
	if err != nil {
		t.Fatalf("%v; create it with: go test ./cmd/hutch-init -run TestDeps -update", err)
	}
	if string(got) == want {
		return
	}
	added, removed := diffLines(string(got), want)
	t.Errorf("hutch-init's dependencies differ from cmd/hutch-init/deps.txt\nadded:   %s\nremoved: %s\n"+
		"If the change is meant, regenerate the list and commit it: go test ./cmd/hutch-init -run TestDeps -update",
		strings.Join(added, " "), strings.Join(removed, " "))
}

// diffLines returns the lines of b missing from a, and of a missing from b.
func diffLines(a, b string) (added, removed []string) {
	as, bs := strings.Split(a, "\n"), strings.Split(b, "\n")
	for _, l := range bs {
		if !slices.Contains(as, l) {
			added = append(added, l)
		}
	}
	for _, l := range as {
		if !slices.Contains(bs, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}
