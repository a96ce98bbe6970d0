package sse

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	for _, v := range []any{map[string]any{"type": "start"}, map[string]any{"type": "stdout", "data": "a\nb"}} {
		if err := w.Send(v); err != nil {
			t.Fatal(err)
		}
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	r := NewReader(strings.NewReader(": comment\n" + rec.Body.String()))
	var got []string
	for {
		b, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	want := []string{`{"type":"start"}`, `{"data":"a\nb","type":"stdout"}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("frames = %q; want %q", got, want)
	}
}

func TestReaderCutFrame(t *testing.T) {
	r := NewReader(strings.NewReader("data: {\"type\":\"start\"}\n\ndata: {\"type\":"))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut frame: err = %v; want io.ErrUnexpectedEOF", err)
	}
}

func TestReaderMultiLineAndLongFrame(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	r := NewReader(strings.NewReader("event: ignored\ndata: a\ndata: b\n\ndata: " + long + "\n\n"))
	b, err := r.Next()
	if err != nil || string(b) != "a\nb" {
		t.Fatalf("multi-line = %q, %v", b, err)
	}
	b, err = r.Next()
	if err != nil || len(b) != len(long) {
		t.Fatalf("long frame = %d bytes, %v", len(b), err)
	}
}
