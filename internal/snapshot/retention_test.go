package snapshot

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/blob"
)

// putOwnMeta stores a snapshot meta of sandbox sb with one own layer of n compressed bytes.
func putOwnMeta(t *testing.T, s *Service, sb, layer string, n int64, origin string, at time.Time) string {
	t.Helper()
	snap := Snapshot{SandboxID: sb, CreatedAt: at, Origin: origin, Format: Format, ParentLayers: []string{},
		Layers: []Layer{{Digest: fakeDigest(layer), SizeBytes: n, CompressedBytes: n}}}
	snap.ID = contentID(snap)
	b, err := json.Marshal(snap)
	must(t, err)
	putBlob(t, s.cfg.Blobs, metaKey(snap.ID), b)
	return snap.ID
}

func idsOf(t *testing.T, s *Service, sb string) []string {
	t.Helper()
	list, err := s.List(context.Background(), sb)
	must(t, err)
	var out []string
	for _, sn := range list {
		out = append(out, sn.ID)
	}
	return out
}

// The quota evicts the sandbox's sleep snapshots, oldest first, and never its requested ones
// nor another sandbox's; what still does not fit is refused with SNAPSHOT_QUOTA_EXCEEDED.
func TestMakeRoom(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		quota   int64
		layer   string
		n       int64
		keep    []string // of req, sleep1, sleep2, other
		refused bool
	}{
		{"fits", 1000, "new", 100, []string{"req", "sleep1", "sleep2"}, false},
		{"evicts the oldest sleep snapshot", 350, "new", 100, []string{"req", "sleep2"}, false},
		{"evicts all sleep snapshots, then refuses", 150, "new", 100, []string{"req"}, true},
		{"a layer stored already costs nothing", 300, "B", 100, []string{"req", "sleep1", "sleep2"}, false},
		{"off", -1, "new", 1 << 40, []string{"req", "sleep1", "sleep2"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blobs, err := blob.NewLocal(t.TempDir(), nil)
			must(t, err)
			s := New(Config{Blobs: blobs, Cache: &Cache{}, QuotaBytes: tc.quota, TempDir: t.TempDir()})
			ids := map[string]string{
				"req":    putOwnMeta(t, s, "sb", "A", 100, OriginRequest, t0),
				"sleep1": putOwnMeta(t, s, "sb", "B", 100, OriginSleep, t0.Add(time.Minute)),
				"sleep2": putOwnMeta(t, s, "sb", "C", 100, OriginSleep, t0.Add(2*time.Minute)),
			}
			other := putOwnMeta(t, s, "other", "D", 5000, OriginSleep, t0)
			_, err = s.makeRoom(context.Background(), "sb", fakeDigest(tc.layer), tc.n, "")
			if tc.refused != errdefs.IsCode(err, errdefs.CodeSnapshotQuota) || (!tc.refused && err != nil) {
				t.Fatalf("makeRoom = %v; refused want %v", err, tc.refused)
			}
			var want []string
			for _, k := range tc.keep {
				want = append(want, ids[k])
			}
			if got := idsOf(t, s, "sb"); !slices.Equal(got, want) {
				t.Errorf("kept %v; want %v", got, want)
			}
			if got := idsOf(t, s, "other"); !slices.Equal(got, []string{other}) {
				t.Errorf("another sandbox's snapshots = %v", got)
			}
		})
	}
}

// pruneSleep keeps the newest SleepKeep sleep snapshots (the one just taken among them) and
// every requested one.
func TestPruneSleep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, keep := range []int{1, 2} {
		blobs, err := blob.NewLocal(t.TempDir(), nil)
		must(t, err)
		s := New(Config{Blobs: blobs, Cache: &Cache{}, SleepKeep: keep, TempDir: t.TempDir()})
		req := putOwnMeta(t, s, "sb", "A", 1, OriginRequest, t0)
		s1 := putOwnMeta(t, s, "sb", "B", 1, OriginSleep, t0.Add(time.Minute))
		s2 := putOwnMeta(t, s, "sb", "C", 1, OriginSleep, t0.Add(2*time.Minute))
		s3 := putOwnMeta(t, s, "sb", "D", 1, OriginSleep, t0.Add(3*time.Minute))
		if _, err := s.pruneSleep(context.Background(), "sb", s3); err != nil {
			t.Fatal(err)
		}
		want := []string{req, s3}
		if keep == 2 {
			want = []string{req, s2, s3}
		}
		if got := idsOf(t, s, "sb"); !slices.Equal(got, want) {
			t.Errorf("keep %d: kept %v; want %v (s1 %s)", keep, got, want, s1)
		}
	}
}
