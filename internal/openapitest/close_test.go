package openapitest

import (
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestCloseObjects: a closed schema refuses a property it does not name; an allOf of objects
// becomes their union, closed, and its branches close in their own uses; an allOf with a
// branch that is no plain object, free objects and schemas that declare additionalProperties
// keep accepting them.
func TestCloseObjects(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData([]byte(`
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /x:
    get:
      responses:
        '200':
          description: ok
          content:
            application/json:
              schema:
                type: object
                properties: {inline: {type: string}}
components:
  schemas:
    Named: {type: object, properties: {a: {type: string}, nested: {type: object, properties: {n: {type: string}}}}}
    Both:
      allOf:
        - {$ref: '#/components/schemas/Base'}
        - {type: object, properties: {b: {type: string}}}
    Base: {type: object, properties: {a: {type: string}}}
    Mixed:
      allOf:
        - {$ref: '#/components/schemas/Open'}
        - {type: object, properties: {b: {type: string}}}
    Open:
      oneOf:
        - {type: object, properties: {a: {type: string}}}
        - {type: string}
    Free: {type: object}
    Map: {type: object, properties: {a: {type: string}}, additionalProperties: {type: string}}
`))
	if err != nil {
		t.Fatal(err)
	}
	// Named, its nested object, the inline reply, Both (merged), Base.
	if n := CloseObjects(doc); n != 5 {
		t.Errorf("closed %d schemas; want 5", n)
	}
	inline := doc.Paths.Value("/x").Get.Responses.Value("200").Value.Content["application/json"].Schema.Value
	for _, tc := range []struct {
		name   string
		schema *openapi3.Schema
		value  any
		ok     bool
	}{
		{"named, its own fields", doc.Components.Schemas["Named"].Value, map[string]any{"a": "x", "nested": map[string]any{"n": "y"}}, true},
		{"named, an extra field", doc.Components.Schemas["Named"].Value, map[string]any{"a": "x", "extra": 1}, false},
		{"nested, an extra field", doc.Components.Schemas["Named"].Value, map[string]any{"nested": map[string]any{"extra": 1}}, false},
		{"inline reply, an extra field", inline, map[string]any{"inline": "x", "extra": 1}, false},
		{"allOf, fields of both branches", doc.Components.Schemas["Both"].Value, map[string]any{"a": "x", "b": "y"}, true},
		{"allOf, an extra field", doc.Components.Schemas["Both"].Value, map[string]any{"a": "x", "b": "y", "extra": 1}, false},
		{"allOf branch in its own use, an extra field", doc.Components.Schemas["Base"].Value, map[string]any{"a": "x", "b": "y"}, false},
		{"allOf with a oneOf branch, fields of both", doc.Components.Schemas["Mixed"].Value, map[string]any{"a": "x", "b": "y"}, true},
		{"free object", doc.Components.Schemas["Free"].Value, map[string]any{"anything": 1}, true},
		{"declared additionalProperties", doc.Components.Schemas["Map"].Value, map[string]any{"a": "x", "k": "v"}, true},
	} {
		err := tc.schema.VisitJSON(tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v; want ok=%v", tc.name, err, tc.ok)
		}
	}
}
