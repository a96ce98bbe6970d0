package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/openapitest"
)

// The suite's HTTP calls to hutchd go through specTransport (installed as
// http.DefaultTransport by TestMain, so the SDK's clients, the raw http.DefaultClient calls and
// the WebSocket dials all pass it): each response to a /v1 operation of api/openapi.yaml is
// held to the document. Its status must be declared (a 2xx explicitly, an error at least by
// `default`), its declared headers present and valid, its Content-Type one the status declares,
// and then by kind:
//   - JSON: the body against its schema (the error envelope on every non-2xx), with every
//     object schema that lists its properties closed to others and each allOf of objects
//     merged into one (openapitest.CloseObjects);
//   - text/event-stream: each frame's data, as it is read, against the media type's
//     x-sse-event schema (or its schema when it has none);
//   - a 101 WebSocket upgrade: the status only (the connection is the terminal's, not ours);
//   - anything else (file downloads, the CA certificate): the content type only, the body
//     streams through untouched.
//
// A response outside the document is a violation, reported as an error of the test whose
// context (ctxT) carried the request, when that test is still running; every other violation
// (a request on context.Background, a stream read after its test ended) is listed at the end
// of TestMain, which then fails the run. Responses whose status the document describes
// without content are counted and listed at the end, not failed: the document has more to say
// there.

// specCtxKey keys the *testing.T a request's context carries (ctxT puts it there).
type specCtxKey struct{}

// withTest returns ctx carrying t, so that a violation in a response to a request made with
// it is reported to t.
func withTest(ctx context.Context, t *testing.T) context.Context {
	spec.watch(t)
	return context.WithValue(ctx, specCtxKey{}, t)
}

// spec is the validating transport of the suite; installed by installSpecTransport.
var spec = &specTransport{perTest: map[*testing.T]*testViolations{}, undescribed: map[string]int{}, checked: map[string]int{}}

type testViolations struct {
	list   []string
	closed bool // the test's report ran: later violations go to the run's list
}

type specTransport struct {
	next   http.RoundTripper
	router routers.Router
	doc    *openapi3.T

	mu          sync.Mutex
	perTest     map[*testing.T]*testViolations
	orphans     []string       // violations no running test could take
	undescribed map[string]int // "op status" whose response the document gives no content
	checked     map[string]int // operationId -> responses validated
}

// installSpecTransport loads the document and wraps http.DefaultTransport with spec.
func installSpecTransport(ctx context.Context) error {
	doc, err := openapitest.Load(ctx)
	if err != nil {
		return err
	}
	// A field the document does not name is a response outside it: JSON Schema would let it
	// through.
	openapitest.CloseObjects(doc)
	// The test hutchds listen on free ports, not on the document's server URL: match paths on
	// any host.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return fmt.Errorf("openapi router: %w", err)
	}
	spec.doc, spec.router, spec.next = doc, router, http.DefaultTransport
	http.DefaultTransport = spec
	return nil
}

// watch makes sure t reports its violations when it ends (once per test).
func (s *specTransport) watch(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.perTest[t]; ok {
		return
	}
	tv := &testViolations{}
	s.perTest[t] = tv
	t.Cleanup(func() {
		s.mu.Lock()
		list := tv.list
		tv.closed, tv.list = true, nil
		s.mu.Unlock()
		for _, v := range list {
			t.Errorf("response outside api/openapi.yaml: %s", v)
		}
	})
}

// violation records msg for the test of ctx, or for the run.
func (s *specTransport) violation(ctx context.Context, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := ctx.Value(specCtxKey{}).(*testing.T); ok {
		if tv := s.perTest[t]; tv != nil && !tv.closed {
			tv.list = append(tv.list, msg)
			return
		}
		msg = t.Name() + ": " + msg
	}
	s.orphans = append(s.orphans, msg)
}

// report prints what the run found and returns false if any violation went unreported.
func (s *specTransport) report() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.doc == nil {
		return true
	}
	total := 0
	for _, n := range s.checked {
		total += n
	}
	fmt.Printf("openapi: %d responses of %d operations checked against api/openapi.yaml\n", total, len(s.checked))
	var missed []string
	for _, op := range openapitest.Operations(s.doc) {
		if s.checked[op.OperationID] == 0 {
			missed = append(missed, op.OperationID)
		}
	}
	if len(missed) > 0 {
		fmt.Printf("openapi: operations no test reached: %s\n", strings.Join(missed, ", "))
	}
	if len(s.undescribed) > 0 {
		keys := slices.Sorted(maps.Keys(s.undescribed))
		fmt.Printf("openapi: responses the document declares without content (not checked): %s\n", strings.Join(keys, ", "))
	}
	if len(s.orphans) == 0 {
		return true
	}
	fmt.Printf("openapi: %d responses outside api/openapi.yaml:\n", len(s.orphans))
	for _, v := range s.orphans {
		fmt.Println("  " + v)
	}
	return false
}

func (s *specTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(req.URL.Path, "/v1/") {
		return s.next.RoundTrip(req)
	}
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		// Not an operation of the document (tests probe unknown paths and methods on
		// purpose); the route checks of api/v1 and internal/server hold the route set.
		return s.next.RoundTrip(req)
	}
	resp, err := s.next.RoundTrip(req)
	if err != nil || req.Method == http.MethodHead {
		return resp, err
	}
	where := fmt.Sprintf("%s %s (%s) → %d", req.Method, req.URL.RequestURI(), route.Operation.OperationID, resp.StatusCode)
	fail := func(format string, args ...any) {
		s.violation(req.Context(), where+": "+fmt.Sprintf(format, args...))
	}
	s.mu.Lock()
	s.checked[route.Operation.OperationID]++
	s.mu.Unlock()

	responses := route.Operation.Responses
	ref := responses.Status(resp.StatusCode)
	if ref == nil && resp.StatusCode < 300 {
		fail("status %d is not declared", resp.StatusCode)
		return resp, nil
	}
	if ref == nil {
		ref = responses.Default()
	}
	if ref == nil || ref.Value == nil {
		fail("status %d is not declared and there is no default", resp.StatusCode)
		return resp, nil
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: true},
	}
	// Status and declared headers, for every kind of body.
	if err := openapi3filter.ValidateResponse(req.Context(), input); err != nil {
		fail("%v", err)
	}
	content := ref.Value.Content
	if len(content) == 0 {
		if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusNoContent {
			s.mu.Lock()
			s.undescribed[fmt.Sprintf("%s %d", route.Operation.OperationID, resp.StatusCode)]++
			s.mu.Unlock()
		}
		return resp, nil
	}
	ctype := resp.Header.Get("Content-Type")
	media := content.Get(ctype)
	if media == nil {
		fail("Content-Type %q is not one of %v", ctype, slices.Sorted(maps.Keys(content)))
		return resp, nil
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			// The caller meets the cut (or its cancelled context) itself, after the bytes.
			resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
			return resp, nil
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		input.Options = &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
		input.Options.WithCustomSchemaErrorFunc(schemaMessage)
		input.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(req.Context(), input); err != nil {
			fail("%v\nbody: %s", err, clip(body))
		}
		if resp.StatusCode >= 300 {
			checkEnvelope(resp.StatusCode, body, fail)
		}
	case mt == "text/event-stream":
		schema := media.Schema
		if ev, ok := media.Extensions["x-sse-event"]; ok {
			schema, err = s.extensionSchema(ev)
			if err != nil {
				fail("x-sse-event: %v", err)
				return resp, nil
			}
		}
		if schema == nil || schema.Value == nil {
			return resp, nil
		}
		resp.Body = &sseValidator{rc: resp.Body, check: func(data []byte) {
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				fail("event %s: not JSON: %v", clip(data), err)
				return
			}
			if err := schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors(),
				openapi3.SetSchemaErrorMessageCustomizer(schemaMessage)); err != nil {
				fail("event %s: %v", clip(data), err)
			}
		}}
	}
	return resp, nil
}

// checkEnvelope holds an error envelope to what the document's conventions say beyond its
// schema: httpStatus is the reply's status, and code is a code of errdefs whose status that is.
func checkEnvelope(status int, body []byte, fail func(string, ...any)) {
	var env struct {
		Code       errdefs.Code `json:"code"`
		HTTPStatus int          `json:"httpStatus"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return // the schema check has said it
	}
	if env.HTTPStatus != status {
		fail("error envelope has httpStatus %d", env.HTTPStatus)
	}
	if !env.Code.Known() {
		fail("error code %q is not one of errdefs", env.Code)
	} else if env.Code.HTTPStatus() != status {
		fail("error code %s has status %d in errdefs", env.Code, env.Code.HTTPStatus())
	}
}

// schemaMessage says where a value broke its schema and why, without the schema itself (which
// kin-openapi prints whole by default).
func schemaMessage(err *openapi3.SchemaError) string {
	return fmt.Sprintf("at /%s: %s", strings.Join(err.JSONPointer(), "/"), err.Reason)
}

// extensionSchema resolves an extension's {$ref: '#/components/schemas/Name'}.
func (s *specTransport) extensionSchema(ext any) (*openapi3.SchemaRef, error) {
	m, ok := ext.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%v is not a {$ref} object", ext)
	}
	ref, _ := m["$ref"].(string)
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not a component schema", ref)
	}
	sr := s.doc.Components.Schemas[name]
	if sr == nil {
		return nil, fmt.Errorf("no component schema %q", name)
	}
	return sr, nil
}

// sseValidator passes a text/event-stream body through unchanged, handing each complete
// frame's data (its data: lines joined by newlines) to check as the reader reads it.
type sseValidator struct {
	rc      io.ReadCloser
	check   func(data []byte)
	partial []byte // the bytes of the current line not yet ended
	data    [][]byte
}

func (v *sseValidator) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.feed(p[:n])
	return n, err
}

func (v *sseValidator) Close() error { return v.rc.Close() }

func (v *sseValidator) feed(b []byte) {
	v.partial = append(v.partial, b...)
	consumed := 0
	for {
		i := bytes.IndexByte(v.partial[consumed:], '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSuffix(v.partial[consumed:consumed+i], []byte("\r"))
		consumed += i + 1
		switch {
		case len(line) == 0:
			if len(v.data) > 0 {
				v.check(bytes.Join(v.data, []byte("\n")))
				v.data = nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			v.data = append(v.data, append([]byte(nil), d...))
		}
	}
	v.partial = append(v.partial[:0], v.partial[consumed:]...)
}

// errReader fails every Read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// clip shortens a body for a message.
func clip(b []byte) string {
	const max = 600
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
