package client

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNoHutchdInternals: the SDK's code (tests aside) imports no package under the
// module's internal/, so SDK users link none of hutchd and an internal refactor cannot break
// them. Its own client/internal packages are allowed.
func TestImportsNoHutchdInternals(t *testing.T) {
	const module = "github.com/hutchdev/hutch/"
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ours := strings.CutPrefix(p, module)
			if ours && (rest == "internal" || strings.HasPrefix(rest, "internal/")) {
				t.Errorf("%s imports %s", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
