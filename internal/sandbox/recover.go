package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/agentclient"
	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/store"
)

// Recover reconciles the store with the host after a start or a crash of hutchd. A sandbox
// recorded as running whose container runs and whose agent answers is re-adopted: it keeps its
// processes, and its network is registered again with the egress service, and its idle timer
// starts again from now. Every other container, overlay mount, network namespace, host veth
// and cgroup of ours is removed; records left in creating or running are marked stopped, and
// records left in stopping or starting (a sleep or wake that hutchd's crash cut short) are
// finished as sleeping, their disk flushed: the next request starts them again, and a sleep
// can be asked again (it is then a no-op); one with snapshotOnSleep whose sleep was cut short
// gets its sleep snapshot. A sandbox recorded as running whose container is paused was frozen
// by a snapshot's or fork's capture that the crash cut short: the capture is rolled back (its
// caller got no answer; nothing of it was stored but a temp file, which the layer cache
// removes when it opens) and the sandbox thawed and re-adopted. A memory wake cut short is
// finished when its restore made a running sandbox that answers (it is adopted, running from
// its image); else the sandbox is left sleeping and its image kept for the next wake, unless
// the restored sandbox had run or the image is gone (recoverWake: the sleep note says so).
// Recover must run before requests are served; a sleep it finishes takes its snapshot through Deps.SleepSnapshotter.
func (m *Manager) Recover(ctx context.Context) error {
	recs, err := m.store.List(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	// A memory wake cut short may still have its restore running, orphaned by hutchd's death:
	// let it finish before the containers are listed (recoverWake decides on what it made).
	for _, rec := range recs {
		if statusOf(rec) == StatusStarting && m.wakeInFlight(rec.ID) {
			m.waitLaunch(ctx, rec)
		}
	}
	// Every backend's containers; a container on another backend than its record names is
	// not the sandbox's and is removed with those that have no record.
	byID := map[string]runtime.State{}
	owner := map[string]runtime.Runtime{}
	var stray []ownedContainer
	for _, name := range slices.Sorted(maps.Keys(m.runtimes)) {
		rt := m.runtimes[name]
		states, err := rt.List(ctx)
		if err != nil {
			return fmt.Errorf("recover: list %s containers: %w", name, err)
		}
		for _, s := range states {
			if _, dup := owner[s.ID]; dup {
				stray = append(stray, ownedContainer{s.ID, rt})
				continue
			}
			byID[s.ID], owner[s.ID] = s, rt
		}
	}
	for _, rec := range recs {
		if rt, ok := owner[rec.ID]; ok {
			if want, err := m.runtimeOf(rec); err != nil || want != rt {
				stray = append(stray, ownedContainer{rec.ID, rt})
				delete(byID, rec.ID)
				delete(owner, rec.ID)
			}
		}
	}
	known := map[string]bool{}
	keep := map[string]int{}
	var errs []error
	for _, rec := range recs {
		known[rec.ID] = true
		was := statusOf(rec)
		st, ok := byID[rec.ID]
		if ok && was == StatusRunning && st.Status == runtime.StatusPaused {
			// Frozen by a snapshot's capture (Capture) that hutchd's death cut short: the
			// caller got no answer, so the capture is rolled back (its temp files go with the
			// layer cache's start) and the sandbox thawed and adopted as if never frozen.
			st = m.thaw(ctx, rec, owner[rec.ID], st)
		}
		wake := was == StatusStarting && m.wakeInFlight(rec.ID)
		if wake && ok && st.Status == runtime.StatusRunning {
			// The restored sandbox runs the image's agent binary, not this hutchd's.
			if sr, ok := m.readSleepRecord(rec.ID); ok {
				if err := os.WriteFile(m.agentBinPath(rec.ID), []byte(sr.AgentBin), 0o600); err != nil {
					m.log.WarnContext(ctx, "record agent binary", "sandbox_id", rec.ID, "err", err)
				}
			}
		}
		if (was == StatusRunning || wake) && ok && st.Status == runtime.StatusRunning && m.adopt(ctx, rec, st) {
			if a, ok := owner[rec.ID].(runtime.Adopter); ok {
				a.Adopt(rec.ID)
			}
			keep[rec.ID] = rec.NetSlot
			if wake {
				// The restore finished after hutchd died: the sandbox runs from its image.
				m.discardMemory(ctx, rec.ID)
				if err := m.transition(ctx, rec.ID, StatusRunning, ""); err != nil {
					errs = append(errs, err)
				}
				m.auditRecovered(ctx, rec, "adopted restored", nil)
				continue
			}
			m.auditRecovered(ctx, rec, "adopted", nil)
			continue
		}
		if wake {
			// A container that runs, is paused or has stopped was started from the image: its
			// processes ran. One still created or creating (its restore cut short) never ran.
			ran := ok && (st.Status == runtime.StatusRunning || st.Status == runtime.StatusPaused || st.Status == runtime.StatusStopped)
			m.recoverWake(ctx, rec, ran)
		}
		inTransition := was == StatusStopping || was == StatusStarting
		if err := m.teardown(ctx, rec, inTransition); err != nil {
			errs = append(errs, err)
			m.auditRecovered(ctx, rec, "teardown failed", err)
			continue
		}
		switch {
		case was == StatusRunning || was == StatusCreating:
			if err := m.transition(ctx, rec.ID, StatusStopped, ""); err != nil {
				errs = append(errs, err)
			}
			m.auditRecovered(ctx, rec, "stopped", nil)
		case inTransition:
			m.log.InfoContext(ctx, "finished an interrupted transition as sleeping", "sandbox_id", rec.ID, "was", rec.Status)
			if err := m.transition(ctx, rec.ID, StatusSleeping, ""); err != nil {
				errs = append(errs, err)
				continue
			}
			m.auditRecovered(ctx, rec, "sleeping", nil)
			// A sleep cut short still leaves its snapshot, as a finished one does (the
			// snapshotter must be set before Recover for that).
			if was == StatusStopping && rec.SnapshotOnSleep {
				m.snapshotAsleep(ctx, rec)
			}
		}
	}
	// Containers with no record: a create that crashed before its insert committed, or a
	// record destroyed while hutchd was down.
	for id := range byID {
		if !known[id] {
			stray = append(stray, ownedContainer{id, owner[id]})
		}
	}
	for _, c := range stray {
		m.log.WarnContext(ctx, "removing container without a record", "sandbox_id", c.id, "runtime", c.rt.Name())
		m.auditContainerRemoved(ctx, c.id, c.rt.Name())
		if err := c.rt.Delete(ctx, c.id, true); err != nil {
			errs = append(errs, fmt.Errorf("recover: delete %s container %s: %w", c.rt.Name(), c.id, err))
		}
	}
	// Cgroups that belong to no running sandbox: a container's outlives it when hutchd or the
	// host dies between the runtime's create and its delete.
	for _, name := range slices.Sorted(maps.Keys(m.runtimes)) {
		sw, ok := m.runtimes[name].(runtime.CgroupSweeper)
		if !ok {
			continue
		}
		removed, err := sw.SweepCgroups(ctx, func(id string) bool { _, ok := keep[id]; return ok })
		if len(removed) > 0 {
			m.log.WarnContext(ctx, "removed stray cgroups", "runtime", name, "cgroups", removed)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("recover: %w", err))
		}
	}
	// Mounts, namespaces and links that belong to no running sandbox.
	prefix := filepath.Join(m.cfg.DataDir, "sandboxes") + "/"
	mounts, err := m.rootfs.Mounted(prefix)
	if err != nil {
		errs = append(errs, fmt.Errorf("recover: list mounts: %w", err))
	}
	for _, mp := range mounts {
		id, rest, _ := strings.Cut(strings.TrimPrefix(mp, prefix), "/")
		if _, ok := keep[id]; ok && !isViewMount(rest) {
			continue
		}
		m.log.WarnContext(ctx, "removing stray mount", "path", mp)
		if err := m.rootfs.Unmount(mp); err != nil {
			errs = append(errs, fmt.Errorf("recover: unmount %s: %w", mp, err))
		}
	}
	if err := m.nets.Sweep(ctx, keep); err != nil {
		errs = append(errs, fmt.Errorf("recover: network sweep: %w", err))
	}
	m.log.InfoContext(ctx, "recovered", "sandboxes", len(recs), "adopted", len(keep))
	return errors.Join(errs...)
}

// thaw resumes rec's paused container on rt and returns its state afterwards; st (paused)
// when it cannot, and the sandbox is then torn down as any other it cannot adopt.
func (m *Manager) thaw(ctx context.Context, rec store.Sandbox, rt runtime.Runtime, st runtime.State) runtime.State {
	p, ok := rt.(runtime.Pauser)
	if !ok {
		return st
	}
	if err := p.Resume(ctx, rec.ID); err != nil {
		m.log.WarnContext(ctx, "thaw a sandbox an interrupted capture froze", "sandbox_id", rec.ID, "err", err)
		return st
	}
	now, err := rt.State(ctx, rec.ID)
	if err != nil {
		m.log.WarnContext(ctx, "state after thaw", "sandbox_id", rec.ID, "err", err)
		return st
	}
	m.log.InfoContext(ctx, "thawed a sandbox an interrupted capture froze", "sandbox_id", rec.ID, "status", now.Status)
	return now
}

// wakeInFlight reports whether id's sleep record marks a restore from its memory image that
// began (runContainer) and never ended.
func (m *Manager) wakeInFlight(id string) bool {
	sr, ok := m.readSleepRecord(id)
	return ok && sr.Mode == SleepModeMemory && sr.Restoring
}

// waitLaunch waits (at most launchWait) for a launch of rec's container that an earlier
// hutchd started and that outlived it (runtime.LaunchWaiter).
func (m *Manager) waitLaunch(ctx context.Context, rec store.Sandbox) {
	rt, err := m.runtimeOf(rec)
	if err != nil {
		return
	}
	lw, ok := rt.(runtime.LaunchWaiter)
	if !ok {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, launchWait)
	defer cancel()
	if err := lw.WaitLaunch(wctx, rec.ID); err != nil {
		m.log.WarnContext(ctx, "an interrupted restore is still running; tearing it down", "sandbox_id", rec.ID, "err", err)
	}
}

// launchWait bounds the wait for an orphaned restore: one takes seconds; one still running
// after this is wedged and torn down (the image is then kept, as its sandbox never ran).
const launchWait = 2 * time.Minute

// recoverWake decides on the memory image of rec, whose wake hutchd's death cut short and that
// could not be adopted (it is torn down and left sleeping next). When its container never ran
// (the restore had not made it, or was torn down half-way), nothing ran from the image and
// the disk is as the sleep left it: the image stays, and the next wake restores it. When the
// restored sandbox ran (ran is true) but cannot be adopted, its processes went on from the
// image and changed the disk, so the image no longer matches the disk: it is dropped, and the
// sleep note says why. An image whose files are gone is dropped the same way.
func (m *Manager) recoverWake(ctx context.Context, rec store.Sandbox, ran bool) {
	sr, _ := m.readSleepRecord(rec.ID)
	note := ""
	switch {
	case ran:
		note = "the wake from the memory image was cut short by a restart of hutchd after the sandbox had resumed, and it could not be taken over: the image no longer matches the disk"
	default:
		if _, err := os.Stat(filepath.Join(m.memoryDir(rec.ID), "checkpoint.img")); err != nil {
			note = "the memory image of the interrupted wake is unreadable (" + err.Error() + ")"
		} else if _, err := os.Stat(sr.AgentBin); err != nil {
			note = "the agent binary of the memory image is gone (" + err.Error() + ")"
		}
	}
	if note == "" {
		sr.Restoring = false
		err := m.writeSleepRecord(rec.ID, sr)
		if err == nil {
			m.log.InfoContext(ctx, "kept the memory image of an interrupted wake", "sandbox_id", rec.ID)
			return
		}
		note = "the memory image of the interrupted wake could not be kept (" + err.Error() + ")"
	}
	m.log.WarnContext(ctx, "dropped the memory image of an interrupted wake", "sandbox_id", rec.ID, "why", note)
	m.discardMemory(ctx, rec.ID)
	if err := m.writeSleepRecord(rec.ID, sleepRecord{
		Mode: SleepModeDisk, At: sr.At,
		Note: note + ": processes were stopped and do not restart on wake (only the disk was kept)",
	}); err != nil {
		m.log.WarnContext(ctx, "sleep record", "sandbox_id", rec.ID, "err", err)
	}
}

// ownedContainer is a container and the backend that runs it.
type ownedContainer struct {
	id string
	rt runtime.Runtime
}

// adopt takes over a running sandbox left by an earlier hutchd. It reports false when the
// sandbox cannot be adopted and must be torn down.
func (m *Manager) adopt(ctx context.Context, rec store.Sandbox, st runtime.State) bool {
	n, err := m.nets.Setup(ctx, rec.ID, rec.NetSlot)
	if err != nil {
		m.log.WarnContext(ctx, "adopt: network", "sandbox_id", rec.ID, "err", err)
		return false
	}
	if _, err := m.holdDisk(ctx, rec.ID); err != nil { // mounted again if it is not
		m.log.WarnContext(ctx, "adopt: disk", "sandbox_id", rec.ID, "err", err)
		return false
	}
	rt, err := m.runtimeOf(rec)
	if err != nil {
		m.log.WarnContext(ctx, "adopt: runtime", "sandbox_id", rec.ID, "err", err)
		return false
	}
	tr := m.agentTransport(rec.ID, n.NSPath, refusesExtraFiles(rt))
	if err := waitAgent(ctx, agentclient.New(rec.ID, tr), 3*time.Second); err != nil {
		tr.CloseIdleConnections()
		m.log.WarnContext(ctx, "adopt: agent does not answer", "sandbox_id", rec.ID, "err", err)
		return false
	}
	if err := m.egress.AddSandbox(ctx, rec.ID, n); err != nil {
		tr.CloseIdleConnections()
		m.log.WarnContext(ctx, "adopt: egress", "sandbox_id", rec.ID, "err", err)
		return false
	}
	m.mu.Lock()
	inst := newInstance(st.Pid, n, tr, rec)
	if b, err := os.ReadFile(m.agentBinPath(rec.ID)); err == nil {
		inst.agentBin = string(b)
	}
	m.instances[rec.ID] = inst
	m.mu.Unlock()
	m.log.InfoContext(ctx, "sandbox re-adopted", "sandbox_id", rec.ID, "pid", st.Pid)
	return true
}

// isViewMount reports whether rest (a mountpoint below a sandbox's directory) is the read-only
// view of a directory mount that a snapshot made ([disk/]mounts/<mountID>/view), which a crash during
// the snapshot may leave behind.
func isViewMount(rest string) bool {
	if rootfs.IsIDMapStage(rest) {
		return true // MapLowers' staging mounts of a crashed start: never kept
	}
	parts := strings.Split(strings.TrimPrefix(rest, "disk/"), "/")
	return len(parts) == 3 && parts[0] == "mounts" && parts[2] == "view"
}
