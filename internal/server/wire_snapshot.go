package server

import (
	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/snapshot"
)

// This file maps the snapshot domain types to their api/v1 wire form. snapshot.Snapshot keeps
// its JSON tags: it is also the stored meta blob (snapshots/<id>.json), whose format other
// hosts sharing the blob store read.

func toSnapshot(s snapshot.Snapshot) v1.Snapshot {
	out := v1.Snapshot{
		ID: s.ID, SandboxID: s.SandboxID, CreatedAt: s.CreatedAt, SizeBytes: s.SizeBytes,
		ParentLayers: s.ParentLayers,
		Image:        v1.SnapshotImage{ID: s.Image.ID, Name: s.Image.Name},
		Config: v1.SnapshotConfig{InstanceType: s.Config.InstanceType, EnvVars: s.Config.EnvVars,
			SleepAfter: s.Config.SleepAfter, KeepAlive: s.Config.KeepAlive},
		Format: s.Format, Origin: s.Origin,
	}
	if s.Layers != nil {
		out.Layers = make([]v1.SnapshotLayer, len(s.Layers))
		for i, l := range s.Layers {
			out.Layers[i] = v1.SnapshotLayer{Digest: l.Digest, SizeBytes: l.SizeBytes, CompressedBytes: l.CompressedBytes}
		}
	}
	return out
}

// toSnapshots maps a list; nil stays nil (the reply then says "snapshots": null, as before).
func toSnapshots(in []snapshot.Snapshot) []v1.Snapshot {
	if in == nil {
		return nil
	}
	out := make([]v1.Snapshot, len(in))
	for i, s := range in {
		out[i] = toSnapshot(s)
	}
	return out
}

func toForkResult(r snapshot.ForkResult) v1.ForkResult {
	out := v1.ForkResult{Snapshot: toSnapshot(r.Snapshot), SnapshotMs: r.SnapshotMs, ForkMs: r.ForkMs, TotalMs: r.TotalMs}
	if r.Sandboxes != nil {
		out.Sandboxes = make([]v1.ForkedSandbox, len(r.Sandboxes))
		for i, f := range r.Sandboxes {
			out.Sandboxes[i] = v1.ForkedSandbox{Sandbox: toSandbox(f.Info), StartMs: f.StartMillis}
		}
	}
	return out
}
