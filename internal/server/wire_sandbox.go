package server

import (
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/sandbox"
)

// This file maps the sandbox domain types to and from their api/v1 wire form.

// toSandbox is a sandbox's record as the API sends it.
func toSandbox(in sandbox.Info) v1.Sandbox {
	out := v1.Sandbox{
		ID: in.ID, Status: v1.SandboxStatus(in.Status), Image: in.Image, ImageID: in.ImageID,
		InstanceType: in.InstanceType, EnvVars: in.EnvVars, CreatedAt: in.CreatedAt,
		Address: in.Address, LastError: in.LastError, SleepAfter: in.SleepAfter, KeepAlive: in.KeepAlive,
		Snapshot: in.Snapshot, Layers: in.Layers,
		SnapshotOnSleep: in.SnapshotOnSleep, LastSnapshot: in.LastSnapshot, LastSnapshotError: in.LastSnapshotError,
		Runtime: in.Runtime, SleepMode: in.SleepMode, SleepNote: in.SleepNote,
	}
	if in.StartedAt != nil {
		out.StartedAt = *in.StartedAt
	}
	if in.LastActivityAt != nil {
		out.LastActivityAt = *in.LastActivityAt
	}
	return out
}

// toSandboxes maps a list; nil stays nil (the reply then says "sandboxes": null, as before).
func toSandboxes(in []sandbox.Info) []v1.Sandbox {
	if in == nil {
		return nil
	}
	out := make([]v1.Sandbox, len(in))
	for i, s := range in {
		out[i] = toSandbox(s)
	}
	return out
}

// sleepAfter parses a request's sleepAfter: ok is false when it was absent or null. Bad values
// are VALIDATION_FAILED (sandbox.ParseSleepAfter).
func sleepAfter(v *v1.SleepAfter) (d time.Duration, ok bool, err error) {
	if v == nil {
		return 0, false, nil
	}
	parsed, err := sandbox.ParseSleepAfter(string(*v))
	if err != nil {
		return 0, false, err
	}
	return parsed, true, nil
}

// createOptions is a create request's sandbox options, its sleepAfter already parsed.
func createOptions(req v1.CreateSandboxRequest) (sandbox.CreateOptions, error) {
	d, _, err := sleepAfter(req.SleepAfter)
	if err != nil {
		return sandbox.CreateOptions{}, err
	}
	return sandbox.CreateOptions{
		Image: req.Image, InstanceType: req.InstanceType, EnvVars: req.EnvVars,
		SleepAfter: d, KeepAlive: req.KeepAlive, SnapshotOnSleep: req.SnapshotOnSleep,
		Runtime: req.Runtime,
	}, nil
}

// updateOptions is a PATCH request's changes.
func updateOptions(req v1.UpdateSandboxRequest) (sandbox.UpdateOptions, error) {
	var opts sandbox.UpdateOptions
	d, ok, err := sleepAfter(req.SleepAfter)
	if err != nil {
		return opts, err
	}
	if ok {
		opts.SleepAfter = &d
	}
	opts.KeepAlive = req.KeepAlive
	opts.SnapshotOnSleep = req.SnapshotOnSleep
	return opts, nil
}
