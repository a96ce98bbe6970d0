// Package openapitest loads api/openapi.yaml, the hand-written specification of the public API,
// for the tests that hold the code to it: the route checks of api/v1 and internal/server, and
// the e2e suite's transport that validates every response against it. Only tests import it.
package openapitest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// SpecPath is the absolute path of api/openapi.yaml in the module that holds the working
// directory (a test runs in its package's directory).
func SpecPath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "api", "openapi.yaml"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("openapitest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Load reads and validates the specification. A document kin-openapi finds invalid (a
// schema keyword misspelt, a YAML flow mapping split by a comma, a path parameter left
// undeclared) is an error.
func Load(ctx context.Context) (*openapi3.T, error) {
	path, err := SpecPath()
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("validate %s: %w", path, err)
	}
	return doc, nil
}

// Operation is one method on one path of the specification.
type Operation struct {
	Method      string // upper case, e.g. GET
	Path        string // the path template, e.g. /v1/sandboxes/{id}
	OperationID string
	// TemplateParams are the names in braces in Path, in order.
	TemplateParams []string
	// DeclaredParams are the names of the path parameters declared for the operation (its
	// path item's and its own), sorted.
	DeclaredParams []string
}

// Pattern is the operation as a net/http.ServeMux pattern, "METHOD /path/{param}".
func (o Operation) Pattern() string { return o.Method + " " + o.Path }

var templateParam = regexp.MustCompile(`\{([^}]*)\}`)

// Operations lists every operation of doc, sorted by path, then method.
func Operations(doc *openapi3.T) []Operation {
	var ops []Operation
	for path, item := range doc.Paths.Map() {
		var tmpl []string
		for _, m := range templateParam.FindAllStringSubmatch(path, -1) {
			tmpl = append(tmpl, m[1])
		}
		for method, op := range item.Operations() {
			declared := map[string]bool{}
			for _, params := range []openapi3.Parameters{item.Parameters, op.Parameters} {
				for _, p := range params {
					if p.Value != nil && p.Value.In == openapi3.ParameterInPath {
						declared[p.Value.Name] = true
					}
				}
			}
			ops = append(ops, Operation{
				Method:         strings.ToUpper(method),
				Path:           path,
				OperationID:    op.OperationID,
				TemplateParams: tmpl,
				DeclaredParams: slices.Sorted(maps.Keys(declared)),
			})
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	return ops
}

// CloseObjects makes every object schema of doc that lists its properties and says nothing of
// others refuse them (additionalProperties: false), so that validating a response against doc
// finds a field the document does not name: JSON Schema allows unnamed properties by default.
// Schemas that are branches of an allOf stay open (each branch sees the others' properties),
// and so do the schemas that declare additionalProperties themselves. It returns the number
// of schemas it closed.
func CloseObjects(doc *openapi3.T) int {
	seen := map[*openapi3.Schema]bool{}
	inAllOf := map[*openapi3.Schema]bool{}
	var all []*openapi3.Schema
	var walk func(ref *openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		all = append(all, s)
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		walk(s.Not)
		for _, b := range s.AllOf {
			if b != nil && b.Value != nil {
				inAllOf[b.Value] = true
			}
			walk(b)
		}
		for _, b := range s.OneOf {
			walk(b)
		}
		for _, b := range s.AnyOf {
			walk(b)
		}
	}
	if doc.Components != nil {
		for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
			walk(doc.Components.Schemas[name])
		}
		for _, r := range doc.Components.Responses {
			if r.Value != nil {
				for _, mt := range r.Value.Content {
					walk(mt.Schema)
				}
			}
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, r := range op.Responses.Map() {
				if r.Value != nil {
					for _, mt := range r.Value.Content {
						walk(mt.Schema)
					}
				}
			}
		}
	}
	closed := 0
	no := false
	for _, s := range all {
		if len(s.Properties) == 0 || inAllOf[s] || s.AdditionalProperties.Has != nil || s.AdditionalProperties.Schema != nil {
			continue
		}
		s.AdditionalProperties.Has = &no
		closed++
	}
	return closed
}
