package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// EgressPolicies keeps sandboxes' egress policies (internal/daemon). Validation errors are
// EGRESS_POLICY_INVALID with the JSON pointer of the bad field in context "pointer".
type EgressPolicies interface {
	// Stage validates spec and holds it for sandbox id, about to be created; its first start
	// applies it. Unstage drops it; Commit stores it once the sandbox exists.
	Stage(ctx context.Context, id string, spec policy.Spec) error
	Unstage(id string)
	Commit(ctx context.Context, id string) error
	// Get returns id's policy (zero Spec = allow-all). Unknown sandbox → SANDBOX_NOT_FOUND.
	Get(ctx context.Context, id string) (policy.Spec, error)
	// Set validates, stores and applies spec live, closing connections it no longer allows.
	Set(ctx context.Context, id string, spec policy.Spec) (policy.Spec, error)
	// Forget drops a destroyed sandbox's policy and audit log.
	Forget(ctx context.Context, id string)
	// Events returns up to max audit events of id with seq > since; Subscribe follows new ones.
	Events(id string, since uint64, max int) ([]audit.Event, error)
	Subscribe(id string) (<-chan audit.Event, func())
}

func (s *Server) egressEnabled(w http.ResponseWriter, r *http.Request, op string) (sandboxid.ID, bool) {
	if s.egress == nil {
		writeError(w, r, errdefs.New(errdefs.CodeNotImplemented, "egress policies are not available on this hutchd"), op)
		return "", false
	}
	id, err := pathID(r)
	if err != nil {
		writeError(w, r, err, op)
		return "", false
	}
	return id, true
}

// getEgress: GET /v1/sandboxes/{id}/egress → 200 the policy (v1.EgressPolicy; {"mode":"allow-all"}
// when none was set).
func (s *Server) getEgress(w http.ResponseWriter, r *http.Request) {
	id, ok := s.egressEnabled(w, r, "egress.get")
	if !ok {
		return
	}
	spec, err := s.egress.Get(r.Context(), id.String())
	if err != nil {
		writeError(w, r, err, "egress.get")
		return
	}
	writeJSON(w, http.StatusOK, toEgressPolicy(normalized(spec)))
}

// putEgress: PUT /v1/sandboxes/{id}/egress {v1.EgressPolicy} → 200 the stored policy. Applied
// live. Errors: INVALID_JSON, EGRESS_POLICY_INVALID (unknown fields included), SANDBOX_NOT_FOUND.
func (s *Server) putEgress(w http.ResponseWriter, r *http.Request) {
	id, ok := s.egressEnabled(w, r, "egress.put")
	if !ok {
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, r, err, "egress.put")
		return
	}
	spec, err := decodeSpec(body)
	if err != nil {
		writeError(w, r, err, "egress.put")
		return
	}
	s.setEgress(w, r, id, spec, "egress.put")
}

// patchEgress: PATCH /v1/sandboxes/{id}/egress, a JSON merge patch (RFC 7386) of the current
// policy (null removes a field; arrays are replaced whole) → 200 the stored policy.
func (s *Server) patchEgress(w http.ResponseWriter, r *http.Request) {
	id, ok := s.egressEnabled(w, r, "egress.patch")
	if !ok {
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, r, err, "egress.patch")
		return
	}
	var patch any
	if err := json.Unmarshal(body, &patch); err != nil {
		writeError(w, r, errdefs.Wrap(errdefs.CodeInvalidJSON, err, "request body is not valid JSON"), "egress.patch")
		return
	}
	cur, err := s.egress.Get(r.Context(), id.String())
	if err != nil {
		writeError(w, r, err, "egress.patch")
		return
	}
	curJS, _ := json.Marshal(toEgressPolicy(cur))
	var target any
	_ = json.Unmarshal(curJS, &target) // curJS was just marshalled from a Spec
	merged, _ := json.Marshal(mergePatch(target, patch))
	spec, err := decodeSpec(merged)
	if err != nil {
		writeError(w, r, err, "egress.patch")
		return
	}
	s.setEgress(w, r, id, spec, "egress.patch")
}

func (s *Server) setEgress(w http.ResponseWriter, r *http.Request, id sandboxid.ID, spec policy.Spec, op string) {
	got, err := s.egress.Set(r.Context(), id.String(), spec)
	if err != nil {
		writeError(w, r, err, op)
		return
	}
	writeJSON(w, http.StatusOK, toEgressPolicy(normalized(got)))
}

// normalized fills the defaults a reader should see (mode).
func normalized(spec policy.Spec) policy.Spec {
	if spec.Mode == "" {
		spec.Mode = policy.ModeAllowAll
	}
	return spec
}

// decodeSpec decodes a policy strictly: a JSON object whose fields all exist. Errors:
// INVALID_JSON, EGRESS_POLICY_INVALID (unknown field or wrong type, with its pointer).
func decodeSpec(body []byte) (policy.Spec, error) {
	var raw any
	if err := json.Unmarshal(body, &raw); err != nil {
		return policy.Spec{}, errdefs.Wrap(errdefs.CodeInvalidJSON, err, "request body is not valid JSON")
	}
	if _, ok := raw.(map[string]any); !ok {
		return policy.Spec{}, errdefs.New(errdefs.CodeEgressPolicyInvalid, "an egress policy is a JSON object").With("pointer", "")
	}
	if ptr := unknownField(raw, reflect.TypeOf(v1.EgressPolicy{}), ""); ptr != "" {
		return policy.Spec{}, errdefs.Newf(errdefs.CodeEgressPolicyInvalid, "%s: unknown field", ptr).With("pointer", ptr)
	}
	var spec v1.EgressPolicy
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		ptr := ""
		var te *json.UnmarshalTypeError
		if asTypeError(err, &te) {
			ptr = "/" + strings.ReplaceAll(te.Field, ".", "/")
		}
		return policy.Spec{}, errdefs.Wrap(errdefs.CodeEgressPolicyInvalid, err, ptr+": wrong type").With("pointer", ptr)
	}
	return fromEgressPolicy(spec), nil
}

func asTypeError(err error, te **json.UnmarshalTypeError) bool {
	return errors.As(err, te)
}

// unknownField returns the JSON pointer of the first object key in v that t (a struct, slice,
// map or pointer type) has no field for; "" when there is none.
func unknownField(v any, t reflect.Type, ptr string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			fields[name] = t.Field(i).Type
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			p := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if !ok {
				return p
			}
			if bad := unknownField(m[k], ft, p); bad != "" {
				return bad
			}
		}
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			return ""
		}
		for i, x := range a {
			if bad := unknownField(x, t.Elem(), ptr+"/"+strconv.Itoa(i)); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// mergePatch applies an RFC 7386 JSON merge patch to target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

// egressEvents: GET /v1/sandboxes/{id}/egress/events?since=SEQ&follow=true → SSE frames
// {"type":"event", ...audit.Event} with "id: <seq>" lines, oldest first, from seq > since
// (or > Last-Event-ID). Without follow the stream ends after the stored events; with follow it
// stays open for new ones until the client goes.
func (s *Server) egressEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := s.egressEnabled(w, r, "egress.events")
	if !ok {
		return
	}
	q := r.URL.Query()
	var since uint64
	sinceStr := q.Get("since")
	if sinceStr == "" {
		sinceStr = r.Header.Get("Last-Event-ID")
	}
	if sinceStr != "" {
		n, err := strconv.ParseUint(sinceStr, 10, 64)
		if err != nil {
			writeError(w, r, errdefs.Newf(errdefs.CodeInvalidArgument, "since %q is not a sequence number", sinceStr).With("since", sinceStr), "egress.events")
			return
		}
		since = n
	}
	follow := false
	if f := q.Get("follow"); f != "" {
		b, err := strconv.ParseBool(f)
		if err != nil {
			writeError(w, r, errdefs.Newf(errdefs.CodeInvalidArgument, "follow %q is not a boolean", f), "egress.events")
			return
		}
		follow = b
	}
	if _, err := s.mgr.Get(r.Context(), id); err != nil {
		writeError(w, r, err, "egress.events")
		return
	}
	var live <-chan audit.Event
	if follow {
		ch, cancel := s.egress.Subscribe(id.String())
		defer cancel()
		live = ch
	}
	out := sse.NewWriter(w)
	frame := func(e audit.Event) v1.EgressEventFrame {
		return v1.EgressEventFrame{Type: "event", EgressEvent: toEgressEvent(e)}
	}
	for {
		evs, err := s.egress.Events(id.String(), since, 1000)
		if err != nil {
			_ = out.Send(v1.StreamError{Type: "error", Code: errdefs.CodeOf(err), Error: err.Error()})
			return
		}
		for _, e := range evs {
			if err := out.SendID(strconv.FormatUint(e.Seq, 10), frame(e)); err != nil {
				return
			}
			since = e.Seq
		}
		if len(evs) < 1000 {
			break
		}
	}
	if !follow {
		return
	}
	for {
		select {
		case e, ok := <-live:
			if !ok {
				return
			}
			if e.Seq <= since {
				continue
			}
			if e.Seq > since+1 {
				// The subscriber fell behind: fill the gap from the files.
				evs, _ := s.egress.Events(id.String(), since, 1000)
				for _, g := range evs {
					if g.Seq >= e.Seq {
						break
					}
					if err := out.SendID(strconv.FormatUint(g.Seq, 10), frame(g)); err != nil {
						return
					}
				}
			}
			if err := out.SendID(strconv.FormatUint(e.Seq, 10), frame(e)); err != nil {
				return
			}
			since = e.Seq
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
}

// createEgress decodes the egress policy of a create request's body as strictly as PUT
// .../egress does (decodeSpec): an unknown field, such as a misspelt "deny", is refused, not
// dropped, since a dropped deny list or match fails open. nil when the body has none (or null).
// Errors: EGRESS_POLICY_INVALID with the field's pointer under /egress.
func createEgress(body []byte) (*policy.Spec, error) {
	var raw struct {
		Egress json.RawMessage `json:"egress"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, errdefs.Wrap(errdefs.CodeInvalidJSON, err, "request body is not valid JSON")
	}
	if len(raw.Egress) == 0 || string(bytes.TrimSpace(raw.Egress)) == "null" {
		return nil, nil
	}
	spec, err := decodeSpec(raw.Egress)
	if err != nil {
		var e *errdefs.Error
		if errors.As(err, &e) {
			if ptr, ok := e.Context["pointer"].(string); ok {
				return nil, errdefs.Wrap(e.Code, err, "egress").With("pointer", "/egress"+ptr)
			}
		}
		return nil, err
	}
	return &spec, nil
}

// stageEgress validates a create request's egress policy and stages it for id, unless the
// sandbox exists already (get-or-create leaves an existing sandbox's policy alone). The
// returned done must be called with whether the create succeeded.
func (s *Server) stageEgress(ctx context.Context, id string, spec *policy.Spec) (done func(ctx context.Context, ok bool) error, err error) {
	nop := func(context.Context, bool) error { return nil }
	if spec == nil {
		return nop, nil
	}
	if s.egress == nil {
		return nil, errdefs.New(errdefs.CodeNotImplemented, "egress policies are not available on this hutchd")
	}
	sid, err := sandboxid.Parse(id)
	if err != nil {
		return nil, err
	}
	if _, err := s.mgr.Get(ctx, sid); err == nil {
		return nop, nil
	}
	if err := s.egress.Stage(ctx, id, *spec); err != nil {
		return nil, err
	}
	return func(ctx context.Context, ok bool) error {
		if !ok {
			s.egress.Unstage(id)
			return nil
		}
		return s.egress.Commit(ctx, id)
	}, nil
}
