package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/snapshot"
)

// TestToSandboxJSON pins the JSON of a sandbox's record: the keys and values the API sent when
// sandbox.Info was itself the wire type.
func TestToSandboxJSON(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		in   sandbox.Info
		want string
	}{
		{"minimal", sandbox.Info{ID: "a", Status: sandbox.StatusStopped, Image: "default", InstanceType: "lite",
			CreatedAt: at, SleepAfter: "10m", Runtime: "runc"},
			`{"id":"a","status":"stopped","image":"default","instanceType":"lite","envVars":null,` +
				`"createdAt":"2025-01-02T03:04:05Z","sleepAfter":"10m","keepAlive":false,"snapshotOnSleep":false,"runtime":"runc"}`},
		{"full", sandbox.Info{ID: "b", Status: sandbox.StatusSleeping, Image: "default", ImageID: "sha256-i", InstanceType: "basic",
			EnvVars: map[string]string{"K": "V"}, CreatedAt: at, StartedAt: &at, Address: "10.88.0.2", LastError: "e",
			LastActivityAt: &at, SleepAfter: "30s", KeepAlive: true, Snapshot: "sha256-s", Layers: []string{"l1"},
			SnapshotOnSleep: true, LastSnapshot: "sha256-t", LastSnapshotError: "f", Runtime: "gvisor",
			SleepMode: "disk", SleepNote: "n"},
			`{"id":"b","status":"sleeping","image":"default","imageId":"sha256-i","instanceType":"basic","envVars":{"K":"V"},` +
				`"createdAt":"2025-01-02T03:04:05Z","startedAt":"2025-01-02T03:04:05Z","address":"10.88.0.2","lastError":"e",` +
				`"lastActivityAt":"2025-01-02T03:04:05Z","sleepAfter":"30s","keepAlive":true,"snapshot":"sha256-s","layers":["l1"],` +
				`"snapshotOnSleep":true,"lastSnapshot":"sha256-t","lastSnapshotError":"f","runtime":"gvisor","sleepMode":"disk","sleepNote":"n"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertSameJSON(t, toSandbox(tt.in), tt.want)
		})
	}
}

// TestStoredFormsMatchWire: the domain types that keep JSON tags for their stored form
// (policy.Spec, audit.Event, snapshot.Snapshot) encode exactly as their api/v1 forms, and an
// egress policy survives the way there and back.
func TestStoredFormsMatchWire(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	spec := policy.Spec{
		Mode: "allowlist", Allow: []string{"a.example"}, Deny: []string{"*.bad"}, Ports: []int{8443},
		Inspect: "all", DNS: policy.DNSSpec{Denied: "nxdomain"},
		Rules: []policy.Rule{{ID: "r", Hosts: []string{"a.example"}, Action: "inject", Upstream: "u", Handler: "h",
			Match:  &policy.Match{Methods: []string{"POST"}, Path: &policy.PathMatch{Prefix: "/v1/"}},
			Inject: &policy.Inject{SetHeaders: map[string]string{"X": "${secrets.S}"}, RemoveHeaders: []string{"Y"}, BasicAuth: &policy.BasicAuth{Username: "u", Password: "p"}}}},
		Placeholders: []policy.Placeholder{{Secret: "S", Env: "E", Hosts: []string{"a.example"}, In: []string{"query"}, Prefix: "sk-", OnViolation: "pass"}},
	}
	if got := fromEgressPolicy(toEgressPolicy(spec)); !reflect.DeepEqual(got, spec) {
		t.Errorf("policy round trip:\n got %+v\nwant %+v", got, spec)
	}
	ev := audit.Event{Seq: 7, TS: at, Sandbox: "a", Kind: "http", Decision: "allow", Reason: "r", Rule: "x", Mode: "intercept",
		QName: "q", QType: "A", Rcode: "NOERROR", Answers: 1, Host: "h", Port: 443, OrigDst: "1.2.3.4:443", Proto: "tcp",
		Method: "GET", Path: "/", Query: "redacted", Status: 200, ReqBytes: 1, RespBytes: 2, DurMs: 3, Upstream: "u",
		Handler: "hd", Injected: []string{"Authorization"}, Secrets: []string{"S"}, Location: "query", Redaction: 1, ECH: true,
		Added: []string{"b"}, Removed: []string{"c"}, Closed: 2, Limit: "dns"}
	snap := snapshot.Snapshot{ID: "sha256-x", SandboxID: "a", CreatedAt: at, SizeBytes: 9,
		Layers:       []snapshot.Layer{{Digest: "sha256-l", SizeBytes: 10, CompressedBytes: 9}},
		ParentLayers: []string{}, Image: snapshot.Image{ID: "i", Name: "default"},
		Config: snapshot.SandboxConfig{InstanceType: "lite", EnvVars: map[string]string{"K": "V"}, SleepAfter: "10m", KeepAlive: true},
		Format: "tar+zstd", Origin: "sleep"}
	for _, tt := range []struct {
		name         string
		stored, wire any
	}{
		{"policy", spec, toEgressPolicy(spec)},
		{"empty policy", policy.Spec{}, toEgressPolicy(policy.Spec{})},
		{"event", ev, toEgressEvent(ev)},
		{"snapshot", snap, toSnapshot(snap)},
		{"snapshot without layers", snapshot.Snapshot{ID: "sha256-y"}, toSnapshot(snapshot.Snapshot{ID: "sha256-y"})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want, err := json.Marshal(tt.stored)
			if err != nil {
				t.Fatal(err)
			}
			assertSameJSON(t, tt.wire, string(want))
		})
	}
}

// TestSleepAfterDecoding: a sleepAfter is a duration string or a number of seconds; other JSON
// types, and values out of range, are VALIDATION_FAILED; absent or null leaves it unset.
func TestSleepAfterDecoding(t *testing.T) {
	tests := []struct {
		body    string
		want    time.Duration
		set     bool
		invalid bool
	}{
		{body: `{}`},
		{body: `{"sleepAfter":null}`},
		{body: `{"sleepAfter":"30s"}`, want: 30 * time.Second, set: true},
		{body: `{"sleepAfter":90}`, want: 90 * time.Second, set: true},
		{body: `{"sleepAfter":1.5}`, want: 1500 * time.Millisecond, set: true},
		{body: `{"sleepAfter":"0s"}`, invalid: true},
		{body: `{"sleepAfter":""}`, invalid: true},
		{body: `{"sleepAfter":1e400}`, invalid: true},
		{body: `{"sleepAfter":true}`, invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var req v1.UpdateSandboxRequest
			err := json.Unmarshal([]byte(tt.body), &req)
			var d time.Duration
			var set bool
			if err == nil {
				d, set, err = sleepAfter(req.SleepAfter)
			}
			if tt.invalid {
				if err == nil {
					t.Fatalf("no error, want VALIDATION_FAILED")
				}
				return
			}
			if err != nil || d != tt.want || set != tt.set {
				t.Fatalf("got %v, %v, %v; want %v, %v", d, set, err, tt.want, tt.set)
			}
		})
	}
}

func assertSameJSON(t *testing.T, v any, want string) {
	t.Helper()
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
}

// TestEgressRoundTripEveryField fills every field of the policy, both in its domain form and in
// its wire form, by reflection, and maps it across and back: a field the mapping forgets (a
// rule's match, a deny list) would be a policy silently weakened, so it fails here as soon as
// it is added to one form and not mapped.
func TestEgressRoundTripEveryField(t *testing.T) {
	var spec policy.Spec
	fillEvery(reflect.ValueOf(&spec).Elem(), new(int))
	if got := fromEgressPolicy(toEgressPolicy(spec)); !reflect.DeepEqual(got, spec) {
		t.Errorf("domain → wire → domain:\n got %+v\nwant %+v", got, spec)
	}
	var wire v1.EgressPolicy
	fillEvery(reflect.ValueOf(&wire).Elem(), new(int))
	if got := toEgressPolicy(fromEgressPolicy(wire)); !reflect.DeepEqual(got, wire) {
		t.Errorf("wire → domain → wire:\n got %+v\nwant %+v", got, wire)
	}
}

// fillEvery sets every settable field under v to a distinct non-zero value (n counts them):
// one element per slice and map, every pointer allocated.
func fillEvery(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEvery(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillEvery(v.Index(0), n)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillEvery(k, n)
		fillEvery(e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillEvery(v.Field(i), n)
			}
		}
	}
}
