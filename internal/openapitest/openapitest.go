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
// An allOf of object schemas (`allOf: [Success, {properties}]`) is first replaced by the one
// object it means, the union of its branches' properties and required lists, since a closed
// branch would refuse the other branches' properties; an allOf with a branch that is not a
// plain object stays as it is, and its branches open. Schemas that declare
// additionalProperties themselves stay as they are. It returns the number of schemas it closed.
func CloseObjects(doc *openapi3.T) int {
	mergeAllOf(doc)
	return closeObjects(doc)
}

// mergeAllOf replaces, in place, every allOf of doc whose branches are plain object schemas
// (no composition, no additionalProperties of their own) by their union.
func mergeAllOf(doc *openapi3.T) {
	done := map[*openapi3.Schema]bool{}
	var merge func(s *openapi3.Schema) bool // reports whether s is now a plain object
	plain := func(s *openapi3.Schema) bool {
		return len(s.AllOf) == 0 && len(s.OneOf) == 0 && len(s.AnyOf) == 0 && s.Not == nil &&
			s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil &&
			(s.Type == nil || s.Type.Is("object"))
	}
	merge = func(s *openapi3.Schema) bool {
		if done[s] {
			return plain(s)
		}
		done[s] = true
		if len(s.AllOf) == 0 || len(s.OneOf) > 0 || len(s.AnyOf) > 0 || s.Not != nil {
			return plain(s)
		}
		for _, b := range s.AllOf {
			if b == nil || b.Value == nil || !merge(b.Value) {
				return false
			}
		}
		props := openapi3.Schemas{}
		maps.Copy(props, s.Properties)
		required := slices.Clone(s.Required)
		for _, b := range s.AllOf {
			maps.Copy(props, b.Value.Properties)
			required = append(required, b.Value.Required...)
		}
		slices.Sort(required)
		s.Properties, s.Required, s.AllOf = props, slices.Compact(required), nil
		s.Type = &openapi3.Types{openapi3.TypeObject}
		return plain(s)
	}
	walkSchemas(doc, func(s *openapi3.Schema) { merge(s) })
}

// walkSchemas calls fn on every schema reachable from doc's components and responses, once.
func walkSchemas(doc *openapi3.T, fn func(*openapi3.Schema)) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(ref *openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		fn(s)
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		walk(s.Not)
		for _, list := range [][]*openapi3.SchemaRef{s.AllOf, s.OneOf, s.AnyOf} {
			for _, b := range list {
				walk(b)
			}
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
}

// closeObjects closes the object schemas of doc (see CloseObjects) after mergeAllOf.
func closeObjects(doc *openapi3.T) int {
	// The branches of an allOf left unmerged, and the branches of their compositions, stay
	// open: each sees the properties of the allOf's other branches.
	inAllOf := map[*openapi3.Schema]bool{}
	var open func(ref *openapi3.SchemaRef)
	open = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || inAllOf[ref.Value] {
			return
		}
		inAllOf[ref.Value] = true
		for _, list := range [][]*openapi3.SchemaRef{ref.Value.AllOf, ref.Value.OneOf, ref.Value.AnyOf} {
			for _, b := range list {
				open(b)
			}
		}
	}
	var all []*openapi3.Schema
	walkSchemas(doc, func(s *openapi3.Schema) {
		all = append(all, s)
		for _, b := range s.AllOf {
			open(b)
		}
	})
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
