package testutil

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package has exactly one doc comment, and that it starts
// with "Package <name> " ("Command <dir> " for a main package), so `go doc` opens with the
// package's job. A directory with only test files (an end-to-end suite) keeps its doc in one
// of them.
func TestPackageDocs(t *testing.T) {
	dirs := map[string][]string{} // directory → its .go files
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != repoRoot && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found Go files in %d directories under %s", len(dirs), repoRoot)
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		checkPackageDoc(t, dir, dirs[dir])
	}
}

func checkPackageDoc(t *testing.T, dir string, files []string) {
	t.Helper()
	var src, tests []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			tests = append(tests, f)
		} else {
			src = append(src, f)
		}
	}
	if len(src) == 0 {
		src = tests // a test-only package (test/e2e)
	}
	fset := token.NewFileSet()
	var docs []string // files with a package doc
	var name string
	for _, f := range src {
		af, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			return
		}
		pkg := af.Name.Name
		if name == "" {
			name = pkg
		}
		if af.Doc == nil {
			continue
		}
		docs = append(docs, f)
		want := "Package " + pkg + " "
		if pkg == "main" {
			want = "Command " + filepath.Base(dir) + " "
		}
		if text := docText(af.Doc); !strings.HasPrefix(text, want) {
			t.Errorf("%s: the package doc starts %q; want %q followed by the package's job", f, firstLine(text), want)
		}
	}
	switch {
	case len(docs) == 0:
		t.Errorf("%s: package %s has no doc comment; add one (// Package %s …) above the package clause of its main file or a doc.go", dir, name, name)
	case len(docs) > 1:
		t.Errorf("%s: package %s has a doc comment in %d files (%s); keep one, go doc joins them", dir, name, len(docs), strings.Join(docs, ", "))
	}
}

func docText(g *ast.CommentGroup) string { return strings.TrimSpace(g.Text()) }

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
