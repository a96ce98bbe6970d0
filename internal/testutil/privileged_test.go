package testutil

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const repoRoot = "../.."

// TestPrivilegedListComplete checks scripts/privileged-packages against the test files, both
// ways: every package whose tests ask for root (RequiresRoot, MainRequiresRoot, or a helper of
// another package that calls them) is listed, so scripts/test.sh runs it alone; and every
// listed package still asks, so none waits in the serial queue for nothing. The parallel run's
// HUTCH_TEST_UNPRIVILEGED=1 catches at run time what a text scan might miss.
func TestPrivilegedListComplete(t *testing.T) {
	listed := readList(t)
	gates := gateFuncs(t)
	need := map[string]string{} // package dir -> a file asking for root
	walkGo(t, func(path string, f *ast.File, test bool) {
		if !test || f.Name.Name == "testutil" { // this package's tests run the gate in a child
			return
		}
		// A helper of the package itself is called by its bare name.
		own := strings.TrimSuffix(f.Name.Name, "_test")
		ast.Inspect(f, func(n ast.Node) bool {
			name := calledName(n)
			if id, ok := callee(n).(*ast.Ident); ok {
				name = own + "." + id.Name
			}
			if name != "" && gates[name] {
				need["./"+filepath.ToSlash(filepath.Dir(path))] = path + " calls " + name
			}
			return true
		})
	})
	for dir, why := range need {
		if !slices.Contains(listed, dir) {
			t.Errorf("%s is missing from %s: %s", dir, PrivilegedList, why)
		}
	}
	for _, dir := range listed {
		if _, ok := need[dir]; !ok {
			t.Errorf("%s lists %s, whose tests never ask for root (testutil.RequiresRoot)", PrivilegedList, dir)
		}
	}
}

// gateFuncs returns the calls that ask for root, as "pkg.Func": this package's two gates and
// every exported function outside test files that calls one of them (imagetest.Default, say).
func gateFuncs(t *testing.T) map[string]bool {
	gates := map[string]bool{"testutil.RequiresRoot": true, "testutil.MainRequiresRoot": true}
	walkGo(t, func(path string, f *ast.File, test bool) {
		if test || f.Name.Name == "testutil" {
			return
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !fn.Name.IsExported() || fn.Recv != nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if name := calledName(n); name == "testutil.RequiresRoot" || name == "testutil.MainRequiresRoot" {
					gates[f.Name.Name+"."+fn.Name.Name] = true
				}
				return true
			})
		}
	})
	return gates
}

// callee returns the function expression of a call, else nil.
func callee(n ast.Node) ast.Expr {
	if call, ok := n.(*ast.CallExpr); ok {
		return call.Fun
	}
	return nil
}

// calledName returns "x.F" for a call x.F(...), else "".
func calledName(n ast.Node) string {
	sel, ok := callee(n).(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return x.Name + "." + sel.Sel.Name
}

// walkGo parses every Go file of the module (outside web/ and testdata) and calls fn with its
// path relative to the repository root.
func walkGo(t *testing.T, fn func(path string, f *ast.File, test bool)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if n := e.Name(); p != repoRoot && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "web") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			return err
		}
		fn(rel, f, strings.HasSuffix(p, "_test.go"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readList(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, PrivilegedList))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			if fi, err := os.Stat(filepath.Join(repoRoot, l)); err != nil || !fi.IsDir() {
				t.Errorf("%s lists %s, which is not a directory of the repository", PrivilegedList, l)
			}
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
