package store

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestDiskLayers(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Insert(ctx, Sandbox{ID: "plain", Image: "img", ImageName: "default", InstanceType: "lite", Status: "creating"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Insert(ctx, Sandbox{ID: "fork", Image: "img", ImageName: "default", InstanceType: "lite", Status: "creating",
		Layers: []string{"sha256-b", "sha256-a"}, Snapshot: "sha256-s"}); err != nil {
		t.Fatal(err)
	}
	plain, err := st.Get(ctx, "plain")
	if err != nil || len(plain.Layers) != 0 || plain.Snapshot != "" {
		t.Fatalf("plain = %+v, %v", plain, err)
	}
	fork, err := st.Get(ctx, "fork")
	if err != nil || !reflect.DeepEqual(fork.Layers, []string{"sha256-b", "sha256-a"}) || fork.Snapshot != "sha256-s" {
		t.Fatalf("fork = %+v, %v", fork, err)
	}
	if err := st.SetDisk(ctx, "plain", "img2", "other", []string{"sha256-c"}, "sha256-t"); err != nil {
		t.Fatal(err)
	}
	plain, _ = st.Get(ctx, "plain")
	if plain.Image != "img2" || plain.ImageName != "other" || !reflect.DeepEqual(plain.Layers, []string{"sha256-c"}) || plain.Snapshot != "sha256-t" {
		t.Fatalf("after SetDisk: %+v", plain)
	}
	used, err := st.UsedLayers(ctx)
	want := map[string]bool{"sha256-a": true, "sha256-b": true, "sha256-c": true}
	if err != nil || !reflect.DeepEqual(used, want) {
		t.Fatalf("UsedLayers = %v, %v", used, err)
	}
	if err := st.SetDisk(ctx, "nope", "i", "n", nil, ""); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}
