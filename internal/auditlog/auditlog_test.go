package auditlog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	long := strings.Repeat("é", FieldMax) // 2 bytes a rune: the cut falls inside one
	for _, tc := range []struct {
		name, in string
		want     string // "" = check the cut form
	}{
		{"short", "sb1", "sb1"},
		{"exactly max", strings.Repeat("a", FieldMax), strings.Repeat("a", FieldMax)},
		{"ascii over", strings.Repeat("a", FieldMax+1), strings.Repeat("a", FieldMax) + "…[257 bytes]"},
		{"multibyte over", long, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Bound(tc.in)
			if tc.want != "" {
				if got != tc.want {
					t.Fatalf("Bound = %q, want %q", got, tc.want)
				}
				return
			}
			head, _, ok := strings.Cut(got, "…[")
			if !ok || len(head) > FieldMax || !utf8.ValidString(head) || !strings.HasSuffix(got, "…[512 bytes]") {
				t.Fatalf("Bound = %q: want at most %d valid bytes and the marker", got, FieldMax)
			}
		})
	}
}

// TestDecisionLog: a decision is one JSON record with action, "by": "hutchd", the sandbox ID
// and the attributes, every string attribute bounded.
func TestDecisionLog(t *testing.T) {
	var buf bytes.Buffer
	d := NewDecisionLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	d.Decision(context.Background(), "sandbox.slept", "sb1", slog.String("reason", strings.Repeat("x", 2*FieldMax)), slog.Int("n", 3))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("record %q: %v", buf.String(), err)
	}
	if rec["action"] != "sandbox.slept" || rec["by"] != "hutchd" || rec["id"] != "sb1" || rec["n"] != 3.0 {
		t.Fatalf("record = %v", rec)
	}
	if r, _ := rec["reason"].(string); len(r) > FieldMax+32 || !strings.HasSuffix(r, "bytes]") {
		t.Fatalf("reason not bounded: %d bytes", len(r))
	}
}

// TestOpen: the file is created 0600 and the logger's records land in it.
func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), File)
	l, err := Open(path, 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	NewDecisionLog(l.Logger()).Decision(context.Background(), "sandbox.woke", "sb2")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"action":"sandbox.woke"`) {
		t.Fatalf("file = %q", b)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing", File), 1<<20, 2); err == nil {
		t.Fatal("Open in a missing directory: no error")
	}
}
