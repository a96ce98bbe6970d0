package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// cutReader returns its text, then a broken connection's error.
type cutReader struct{ r io.Reader }

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// TestCopyEvents: an SSE reply passes byte for byte while its sandbox is there; once it is being
// destroyed, the agent's error event (its context cancelled by the shutdown) and a stream cut
// short both end in one SANDBOX_NOT_FOUND error event, and half an event is never passed on.
func TestCopyEvents(t *testing.T) {
	const start = "data: {\"type\":\"start\",\"pid\":7}\n\n"
	const out = "id: 3\ndata: {\"type\":\"stdout\",\"data\":\"say \\\"type\\\":\\\"error\\\"\"}\n\n"
	const agentErr = "data: {\"type\":\"error\",\"code\":\"INTERNAL_ERROR\",\"error\":\"context canceled\"}\n\n"
	const half = "data: {\"type\":\"stdo"
	for _, tc := range []struct {
		name    string
		in      string
		cut     bool
		gone    bool
		want    []string // the "type" and "code" of each event, in order
		wantErr bool
		raw     bool // the output must be the input, byte for byte
	}{
		{"sandbox there: as is", start + out + agentErr, false, false, []string{"start", "stdout", "error INTERNAL_ERROR"}, false, true},
		{"sandbox there, cut: as is and an error", start + out + half, true, false, nil, true, true},
		{"destroyed: the agent's error replaced", start + out + agentErr, false, true, []string{"start", "stdout", "error SANDBOX_NOT_FOUND"}, false, false},
		{"destroyed, cut mid-event", start + out + half, true, true, []string{"start", "stdout", "error SANDBOX_NOT_FOUND"}, false, false},
		{"destroyed, cut between events", start + out, true, true, []string{"start", "stdout", "error SANDBOX_NOT_FOUND"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var src io.Reader = strings.NewReader(tc.in)
			if tc.cut {
				src = &cutReader{src}
			}
			rec := httptest.NewRecorder()
			destroyedEv := func() []byte { return destroyedEvent(agentapi.Public("executeStream"), "sb1") }
			err := copyEvents(rec, src, func() bool { return tc.gone }, destroyedEv)
			if failed := err != nil && !errors.Is(err, io.EOF); failed != tc.wantErr {
				t.Fatalf("copyEvents = %v; want error %v", err, tc.wantErr)
			}
			got := rec.Body.String()
			if tc.raw {
				if got != tc.in {
					t.Fatalf("copied %q; want the input %q", got, tc.in)
				}
				return
			}
			r := sse.NewReader(strings.NewReader(got))
			var types []string
			for {
				frame, err := r.Next()
				if err != nil {
					break
				}
				var ev struct{ Type, Code string }
				if err := json.Unmarshal(frame, &ev); err != nil {
					t.Fatalf("event %q: %v", frame, err)
				}
				// The destroy's event names its message as the stream's schema does, once.
				var fields map[string]any
				if err := json.Unmarshal(frame, &fields); err == nil && ev.Code == "SANDBOX_NOT_FOUND" {
					if _, ok := fields["error"]; !ok || fields["message"] != nil {
						t.Errorf("destroy event %s; want its message under \"error\" only", frame)
					}
				}
				types = append(types, strings.TrimSpace(ev.Type+" "+ev.Code))
			}
			if strings.Join(types, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("events %v; want %v (output %q)", types, tc.want, got)
			}
		})
	}
}
