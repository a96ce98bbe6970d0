package errdefs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestCodesAreClassifiedOnce(t *testing.T) {
	for code, info := range codes {
		if info.class == nil || info.status < 400 || info.status > 599 {
			t.Errorf("code %s: class %v status %d", code, info.class, info.status)
		}
	}
}

func TestIsAndCodeOf(t *testing.T) {
	err := fmt.Errorf("read file: %w", New(CodeFileNotFound, "no such file").With("path", "/x"))
	tests := []struct {
		name   string
		target error
		want   bool
	}{
		{"class", ErrNotFound, true},
		{"other class", ErrInvalidArgument, false},
		{"same code", New(CodeFileNotFound, ""), true},
		{"other code", New(CodeSandboxNotFound, ""), false},
	}
	for _, tt := range tests {
		if got := errors.Is(err, tt.target); got != tt.want {
			t.Errorf("%s: errors.Is = %v; want %v", tt.name, got, tt.want)
		}
	}
	if CodeOf(err) != CodeFileNotFound || HTTPStatus(err) != http.StatusNotFound {
		t.Errorf("CodeOf = %s, HTTPStatus = %d", CodeOf(err), HTTPStatus(err))
	}
	if CodeOf(fmt.Errorf("x: %w", ErrUnavailable)) != CodeUnavailable {
		t.Error("bare class sentinel did not map to its generic code")
	}
	if CodeOf(errors.New("plain")) != CodeInternal {
		t.Error("plain error is not INTERNAL_ERROR")
	}
	if !IsCode(err, CodeFileNotFound) || IsCode(err, CodeIsDirectory) {
		t.Error("IsCode wrong")
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	orig := New(CodeCommandTimeout, "command timed out after 1000 ms").With("timeoutMs", 1000)
	b, err := json.Marshal(ToEnvelope(fmt.Errorf("exec: %w", orig), "command.execute"))
	if err != nil {
		t.Fatal(err)
	}
	var env Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	if env.HTTPStatus != http.StatusRequestTimeout || env.Operation != "command.execute" {
		t.Fatalf("envelope = %+v", env)
	}
	back := env.Err()
	if !errors.Is(back, ErrDeadlineExceeded) || !errors.Is(back, New(CodeCommandTimeout, "")) {
		t.Fatalf("decoded error %v lost its class or code", back)
	}
	if back.Context["timeoutMs"] != float64(1000) {
		t.Fatalf("context = %v", back.Context)
	}
	// A code from a newer server is classed by its status.
	unknown := Envelope{Code: "SOMETHING_NEW", Message: "m", HTTPStatus: 404}.Err()
	if !errors.Is(unknown, ErrNotFound) {
		t.Fatalf("unknown 404 code not classed as not found")
	}
}
