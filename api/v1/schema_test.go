package v1_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
)

// schemaTypes is every components schema of api/openapi.yaml and the Go type that carries it.
// union marks a schema that is one member of an event union: its Go type is the union's (one
// struct with the fields of every frame), so only the schema → Go direction is checked.
var schemaTypes = []struct {
	name  string
	typ   reflect.Type
	union bool
}{
	{name: "BackupRequest", typ: reflect.TypeFor[v1.BackupRequest]()},
	{name: "Terminal", typ: reflect.TypeFor[v1.TerminalInfo]()},
	{name: "TerminalList", typ: reflect.TypeFor[v1.TerminalList]()},
	{name: "TerminalKillReply", typ: reflect.TypeFor[v1.KillTerminalResult]()},
	{name: "WatchEvent", typ: reflect.TypeFor[v1.WatchEvent]()},
	{name: "WatchCheckReply", typ: reflect.TypeFor[v1.ChangeStatusReply]()},
	{name: "CodeContext", typ: reflect.TypeFor[v1.CodeContext]()},
	{name: "CodeContextList", typ: reflect.TypeFor[v1.CodeContextList]()},
	{name: "CodeContextReply", typ: reflect.TypeFor[v1.CodeContextResult]()},
	{name: "CodeError", typ: reflect.TypeFor[v1.CodeError]()},
	{name: "CodeResult", typ: reflect.TypeFor[v1.CodeResult]()},
	{name: "CodeRunEvent", typ: reflect.TypeFor[v1.CodeEvent]()},
	{name: "CodeRunResult", typ: reflect.TypeFor[v1.CodeExecution]()},
	{name: "SnapshotID", typ: reflect.TypeFor[string]()},
	{name: "Snapshot", typ: reflect.TypeFor[v1.Snapshot]()},
	{name: "SnapshotReply", typ: reflect.TypeFor[v1.SnapshotReply]()},
	{name: "Backup", typ: reflect.TypeFor[v1.Backup]()},
	{name: "BackupReply", typ: reflect.TypeFor[v1.BackupReply]()},
	{name: "Timestamp", typ: reflect.TypeFor[time.Time]()},
	{name: "Success", typ: reflect.TypeFor[v1.Reply]()},
	{name: "ErrorEnvelope", typ: reflect.TypeFor[v1.ErrorEnvelope]()},
	{name: "ErrorCode", typ: reflect.TypeFor[errdefs.Code]()},
	{name: "SandboxID", typ: reflect.TypeFor[string]()},
	{name: "SandboxStatus", typ: reflect.TypeFor[v1.SandboxStatus]()},
	{name: "SleepAfter", typ: reflect.TypeFor[v1.SleepAfter]()},
	{name: "InstanceType", typ: reflect.TypeFor[string]()},
	{name: "EnvMap", typ: reflect.TypeFor[map[string]string]()},
	{name: "Sandbox", typ: reflect.TypeFor[v1.Sandbox]()},
	{name: "Runtime", typ: reflect.TypeFor[string]()},
	{name: "CreateSandboxRequest", typ: reflect.TypeFor[v1.CreateSandboxRequest]()},
	{name: "UpdateSandboxRequest", typ: reflect.TypeFor[v1.UpdateSandboxRequest]()},
	{name: "Health", typ: reflect.TypeFor[v1.Health]()},
	{name: "SessionID", typ: reflect.TypeFor[string]()},
	{name: "SessionInfo", typ: reflect.TypeFor[v1.SessionInfo]()},
	{name: "Path", typ: reflect.TypeFor[string]()},
	{name: "ExecRequest", typ: reflect.TypeFor[v1.ExecRequest]()},
	{name: "ExecResult", typ: reflect.TypeFor[v1.ExecResult]()},
	{name: "EventStream", typ: reflect.TypeFor[string]()},
	{name: "ExecEvent", typ: reflect.TypeFor[v1.ExecEvent]()},
	{name: "ExecStartEvent", typ: reflect.TypeFor[v1.ExecEvent](), union: true},
	{name: "ExecOutputEvent", typ: reflect.TypeFor[v1.ExecEvent](), union: true},
	{name: "ExecCompleteEvent", typ: reflect.TypeFor[v1.ExecEvent](), union: true},
	{name: "KillReason", typ: reflect.TypeFor[string]()},
	{name: "StreamErrorEvent", typ: reflect.TypeFor[v1.StreamError]()},
	{name: "FileStreamEvent", typ: reflect.TypeFor[v1.FileStreamEvent]()},
	{name: "FileInfo", typ: reflect.TypeFor[v1.FileInfo]()},
	{name: "ProcessID", typ: reflect.TypeFor[string]()},
	{name: "ProcessStatus", typ: reflect.TypeFor[v1.ProcessStatus]()},
	{name: "Process", typ: reflect.TypeFor[v1.Process]()},
	{name: "StartProcessRequest", typ: reflect.TypeFor[v1.StartProcessRequest]()},
	{name: "ProcessLogs", typ: reflect.TypeFor[v1.ProcessLogs]()},
	{name: "ProcessEvent", typ: reflect.TypeFor[v1.ProcessEvent]()},
	{name: "ProcessInfoEvent", typ: reflect.TypeFor[v1.ProcessEvent](), union: true},
	{name: "ProcessDroppedEvent", typ: reflect.TypeFor[v1.ProcessEvent](), union: true},
	{name: "ProcessOutputEvent", typ: reflect.TypeFor[v1.ProcessEvent](), union: true},
	{name: "ProcessExitEvent", typ: reflect.TypeFor[v1.ProcessEvent](), union: true},
	{name: "WaitLogRequest", typ: reflect.TypeFor[v1.WaitLogRequest]()},
	{name: "WaitLogResult", typ: reflect.TypeFor[v1.WaitLogResult]()},
	{name: "WaitPortRequest", typ: reflect.TypeFor[v1.WaitPortRequest]()},
	{name: "WaitPortResult", typ: reflect.TypeFor[v1.WaitPortResult]()},
	{name: "WaitExitRequest", typ: reflect.TypeFor[v1.WaitExitRequest]()},
	{name: "WaitExitResult", typ: reflect.TypeFor[v1.WaitExitResult]()},
	{name: "PortToken", typ: reflect.TypeFor[string]()},
	{name: "ExposePortRequest", typ: reflect.TypeFor[v1.ExposePortRequest]()},
	{name: "ExposedPort", typ: reflect.TypeFor[v1.ExposedPort]()},
	{name: "Image", typ: reflect.TypeFor[v1.Image]()},
	{name: "ImageBuildEvent", typ: reflect.TypeFor[v1.ImageBuildEvent]()},
	{name: "EgressPolicy", typ: reflect.TypeFor[v1.EgressPolicy]()},
	{name: "EgressRule", typ: reflect.TypeFor[v1.EgressRule]()},
	{name: "EgressPlaceholder", typ: reflect.TypeFor[v1.EgressPlaceholder]()},
	{name: "EgressEventFrame", typ: reflect.TypeFor[v1.EgressEventFrame]()},
	{name: "Secret", typ: reflect.TypeFor[v1.Secret]()},
}

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	return doc
}

// TestSchemasMatchGoTypes checks every components schema of api/openapi.yaml against its Go
// type both ways: each property of the schema is a JSON field of the type with a compatible
// JSON type, each JSON field of the type is a property of the schema, and a property the
// schema requires is never left out by omitempty. Nested inline objects are checked the same
// way. A schema missing from schemaTypes fails too, so a new schema needs its type.
func TestSchemasMatchGoTypes(t *testing.T) {
	doc := loadSpec(t)
	listed := map[string]bool{}
	for _, st := range schemaTypes {
		listed[st.name] = true
		t.Run(st.name, func(t *testing.T) {
			ref, ok := doc.Components.Schemas[st.name]
			if !ok || ref.Value == nil {
				t.Fatalf("schema %s is not in api/openapi.yaml", st.name)
			}
			for _, p := range compare(ref.Value, st.typ, st.name, !st.union, 0) {
				t.Error(p)
			}
		})
	}
	for name := range doc.Components.Schemas {
		if !listed[name] {
			t.Errorf("schema %s has no Go type in schemaTypes", name)
		}
	}
}

// TestCompareFindsDrift shows that compare catches each kind of drift, on a schema made for it.
func TestCompareFindsDrift(t *testing.T) {
	type wire struct {
		A string `json:"a"`
		B int    `json:"b,omitempty"`
		C []int  `json:"c"`
	}
	str, integer, number := openapi3.NewStringSchema(), openapi3.NewIntegerSchema(), openapi3.NewFloat64Schema()
	tests := []struct {
		name   string
		schema *openapi3.Schema
		want   []string // substrings, one per problem, in order
	}{
		{"same", openapi3.NewObjectSchema().WithProperty("a", str).WithProperty("b", integer).
			WithProperty("c", openapi3.NewArraySchema().WithItems(integer)), nil},
		{"field not in schema", openapi3.NewObjectSchema().WithProperty("a", str).WithProperty("b", integer),
			[]string{"X.c: a JSON field of"}},
		{"property not in type", openapi3.NewObjectSchema().WithProperty("a", str).WithProperty("b", integer).
			WithProperty("c", openapi3.NewArraySchema().WithItems(integer)).WithProperty("d", str),
			[]string{"X.d: in the schema"}},
		{"type mismatch", openapi3.NewObjectSchema().WithProperty("a", str).WithProperty("b", number).
			WithProperty("c", openapi3.NewArraySchema().WithItems(str)),
			[]string{"X.b: schema type", "X.c[]: schema type"}},
		{"required but omitempty", openapi3.NewObjectSchema().WithProperty("a", str).WithProperty("b", integer).
			WithProperty("c", openapi3.NewArraySchema().WithItems(integer)).WithRequired([]string{"a", "b"}),
			[]string{"X.b: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compare(tt.schema, reflect.TypeFor[wire](), "X", true, 0)
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %q, want it to contain %q", got[i], w)
				}
			}
		})
	}
}

// compare returns the differences between schema s and Go type typ at path. both: also
// check Go → schema and the required properties.
func compare(s *openapi3.Schema, typ reflect.Type, path string, both bool, depth int) []string {
	var problems []string
	if depth > 8 {
		return nil
	}
	typ = deref(typ)
	gk := goKind(typ)
	if sk := schemaKinds(s); !compatible(gk, sk) {
		return []string{path + ": schema type " + strings.Join(sk, "|") + ", Go type " + typ.String() + " (" + gk + ")"}
	}
	switch gk {
	case "array":
		if s.Items != nil && s.Items.Value != nil {
			problems = append(problems, compare(s.Items.Value, typ.Elem(), path+"[]", both, depth+1)...)
		}
		return problems
	case "object":
		if typ.Kind() != reflect.Struct {
			return nil
		}
	default:
		return nil
	}
	props, required, open := properties(s)
	if len(props) == 0 && open {
		return nil // a free-form object (additionalProperties only)
	}
	fields := jsonFields(typ)
	for _, name := range sortedKeys(props) {
		f, ok := fields[name]
		if !ok {
			problems = append(problems, path+"."+name+": in the schema, not a JSON field of "+typ.String())
			continue
		}
		problems = append(problems, compare(props[name], f.typ, path+"."+name, both, depth+1)...)
	}
	if !both {
		return problems
	}
	for _, name := range sortedKeys(fields) {
		if _, ok := props[name]; !ok {
			problems = append(problems, path+"."+name+": a JSON field of "+typ.String()+", not in the schema")
		}
	}
	for _, name := range required {
		if f, ok := fields[name]; ok && f.omitted {
			problems = append(problems, path+"."+name+": required by the schema, but omitempty/omitzero in "+typ.String())
		}
	}
	return problems
}

// properties merges the properties of s and of its allOf, oneOf and anyOf members; required
// is what s and its allOf members require; open reports additionalProperties.
func properties(s *openapi3.Schema) (props map[string]*openapi3.Schema, required []string, open bool) {
	props = map[string]*openapi3.Schema{}
	var walk func(s *openapi3.Schema, all bool)
	walk = func(s *openapi3.Schema, all bool) {
		for name, p := range s.Properties {
			if p.Value != nil {
				props[name] = p.Value
			}
		}
		if all {
			required = append(required, s.Required...)
		}
		if s.AdditionalProperties.Has != nil && *s.AdditionalProperties.Has || s.AdditionalProperties.Schema != nil {
			open = true
		}
		for _, m := range s.AllOf {
			walk(m.Value, all)
		}
		for _, m := range slices.Concat(s.OneOf, s.AnyOf) {
			walk(m.Value, false)
		}
	}
	walk(s, true)
	return props, required, open
}

type field struct {
	typ     reflect.Type
	omitted bool // omitempty or omitzero: absent when zero
}

// jsonFields are the JSON object keys encoding/json writes for struct type t, embedded
// structs flattened.
func jsonFields(t reflect.Type) map[string]field {
	out := map[string]field{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct {
			for k, v := range jsonFields(deref(f.Type)) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitted := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		out[name] = field{typ: f.Type, omitted: omitted}
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// goKind is the JSON type encoding/json gives t.
func goKind(t reflect.Type) string {
	switch {
	case t == timeType:
		return "string"
	case t == rawType, t.Kind() == reflect.Interface:
		return "any"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string" // base64
		}
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "any"
}

// schemaKinds is the JSON types schema s allows; nil means any.
func schemaKinds(s *openapi3.Schema) []string {
	if s.Type != nil && len(*s.Type) > 0 {
		return slices.Clone([]string(*s.Type))
	}
	if len(s.Properties) > 0 {
		return []string{"object"}
	}
	var kinds []string
	for _, m := range s.AllOf {
		if k := schemaKinds(m.Value); k != nil {
			return k
		}
	}
	for _, m := range slices.Concat(s.OneOf, s.AnyOf) {
		k := schemaKinds(m.Value)
		if k == nil {
			return nil
		}
		kinds = append(kinds, k...)
	}
	return kinds
}

// compatible reports whether values of Go JSON type g can carry what schema types s allow:
// a Go integer is not enough for a schema number, a Go number is for a schema integer.
func compatible(g string, s []string) bool {
	if s == nil || g == "any" {
		return true
	}
	for _, k := range s {
		if k == g || (k == "integer" && g == "number") {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
