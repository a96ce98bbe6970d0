package server

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/hutchdev/hutch/internal/agentapi"
	"github.com/hutchdev/hutch/internal/openapitest"
)

// TestDestroyedEventSchema: the SANDBOX_NOT_FOUND event that ends a stream cut by a destroy
// is one of the events api/openapi.yaml gives that route's stream (its x-sse-event schema,
// with every object closed to the fields it names), and carries the message where that
// stream's readers look for it.
func TestDestroyedEventSchema(t *testing.T) {
	doc, err := openapitest.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	openapitest.CloseObjects(doc)
	msgField := map[string]string{"runCode": "value", "runCodeOnce": "value", "watch": "message"}
	checked := 0
	for _, rt := range agentapi.Routes {
		if rt.Public == nil {
			continue
		}
		schema := sseEventSchema(t, doc, rt.Public.OperationID)
		if schema == nil {
			continue
		}
		checked++
		t.Run(rt.ID, func(t *testing.T) {
			frame := destroyedEvent(rt, "sb1")
			data, ok := bytes.CutPrefix(frame, []byte("data: "))
			if !ok || !bytes.HasSuffix(data, []byte("\n\n")) {
				t.Fatalf("event %q is not one SSE data frame", frame)
			}
			var v map[string]any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatalf("event %s: %v", data, err)
			}
			if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
				t.Fatalf("event %s does not match the %s stream's schema: %v", data, rt.ID, err)
			}
			key := msgField[rt.ID]
			if key == "" {
				key = "error"
			}
			if msg, _ := v[key].(string); !strings.Contains(msg, `"sb1" was destroyed`) {
				t.Errorf("event %s: %q = %q; want the destroy's message", data, key, msg)
			}
			if v["code"] != "SANDBOX_NOT_FOUND" {
				t.Errorf("event %s: code %v; want SANDBOX_NOT_FOUND", data, v["code"])
			}
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d event streams; want at least exec, file, process, watch and code", checked)
	}
}

// sseEventSchema is the x-sse-event schema of operationID's text/event-stream reply in doc,
// nil when it has none.
func sseEventSchema(t *testing.T, doc *openapi3.T, operationID string) *openapi3.Schema {
	t.Helper()
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.OperationID != operationID {
				continue
			}
			resp := op.Responses.Status(200)
			if resp == nil || resp.Value == nil {
				return nil
			}
			media := resp.Value.Content.Get("text/event-stream")
			if media == nil {
				return nil
			}
			ext, ok := media.Extensions["x-sse-event"].(map[string]any)
			if !ok {
				return nil
			}
			ref, _ := ext["$ref"].(string)
			name, ok := strings.CutPrefix(ref, "#/components/schemas/")
			sr := doc.Components.Schemas[name]
			if !ok || sr == nil || sr.Value == nil {
				t.Fatalf("%s: x-sse-event %v names no component schema", operationID, ext)
			}
			return sr.Value
		}
	}
	return nil
}
