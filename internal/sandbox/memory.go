package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/agentclient"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
	"github.com/hutchdev/hutch/internal/store"
)

// Memory sleep.
//
// On a backend that can save a whole sandbox (runtime.Checkpointer with CheckpointSupport nil:
// gVisor with a recent runsc), a sleep checkpoints the sandbox into <sandbox dir>/memory
// before the rest of the teardown, and the wake that follows restores it from there instead of
// starting it afresh: every process (shells of sessions, background processes, terminals,
// code contexts with their variables, dev servers) continues where it was. What does not
// survive: connections. Every TCP connection of the sandbox (the agent's to hutchd, the
// sandbox's own out through egress) is reset at the checkpoint, so open streams, terminals'
// WebSockets and watch streams end and their clients reconnect; listening TCP sockets are bound
// and listening again after the restore (gVisor re-creates them in the namespace, which hutchd
// sets up again at the same path); unix sockets, pipes and PTYs are inside the Sentry and are
// saved. Clocks: CLOCK_REALTIME is the host's after the restore; monotonic clocks do not count
// the time asleep.
//
// A restore needs the same container: the same mounts at the same host paths (the root file
// system, mounted again from the same disk, /etc files rewritten, and the same hutch-init
// binary: the path is kept in the sleep record, since a newer hutchd may run another) and the
// same network namespace path. A wake restores only a sandbox that went to sleep that way and
// has not been started since: a stop, a failed restore or any fresh start discards the image.
// When a checkpoint is not possible (another runtime, an older runsc, a save that fails), the
// sleep keeps the disk only, as on runc, and the sleep record's note says why (Info.SleepNote).

// sleepRecord is <sandbox dir>/sleep.json: what the last sleep kept.
type sleepRecord struct {
	// Mode is SleepModeMemory (an image in memoryDir) or SleepModeDisk.
	Mode string `json:"mode"`
	// Note says why a sleep kept the disk only.
	Note string `json:"note,omitempty"`
	// AgentBin is the host path of the hutch-init binary the checkpointed sandbox runs.
	AgentBin string `json:"agentBin,omitempty"`
	// At is when the sleep began; Took how long the checkpoint took.
	At   time.Time     `json:"at"`
	Took time.Duration `json:"took,omitempty"`
	// Restoring marks a memory image whose restore has begun: a wake that hutchd's death
	// cuts short is finished or undone by Recover from what the runtime shows (recoverWake).
	Restoring bool `json:"restoring,omitempty"`
}

func (m *Manager) memoryDir(id string) string { return filepath.Join(m.sandboxDir(id), "memory") }
func (m *Manager) sleepRecPath(id string) string {
	return filepath.Join(m.sandboxDir(id), "sleep.json")
}

// agentBinPath is <sandbox dir>/agent-bin: the host path of the running sandbox's hutch-init,
// written at each start, read back when a restarted hutchd adopts the sandbox.
func (m *Manager) agentBinPath(id string) string {
	return filepath.Join(m.sandboxDir(id), "agent-bin")
}

// readSleepRecord returns id's sleep record; ok is false when there is none (a sandbox that
// slept before records were kept) or it cannot be read.
func (m *Manager) readSleepRecord(id string) (sleepRecord, bool) {
	b, err := os.ReadFile(m.sleepRecPath(id))
	if err != nil {
		return sleepRecord{}, false
	}
	var r sleepRecord
	if err := json.Unmarshal(b, &r); err != nil || (r.Mode != SleepModeMemory && r.Mode != SleepModeDisk) {
		return sleepRecord{}, false
	}
	return r, true
}

// writeSleepRecord writes id's sleep record (replacing it atomically).
func (m *Manager) writeSleepRecord(id string, r sleepRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := m.sleepRecPath(id) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("sleep record: %w", err)
	}
	if err := os.Rename(tmp, m.sleepRecPath(id)); err != nil {
		return fmt.Errorf("sleep record: %w", err)
	}
	return nil
}

// discardMemory removes id's memory image and sleep record, if any.
func (m *Manager) discardMemory(ctx context.Context, id string) {
	if err := os.RemoveAll(m.memoryDir(id)); err != nil {
		m.log.WarnContext(ctx, "remove memory image", "sandbox_id", id, "err", err)
	}
	_ = os.Remove(m.sleepRecPath(id))
}

// checkpointTimeout bounds one checkpoint. A sandbox can wedge its own (with 10,000
// connections held open to its agent, runsc never finished); the sleep then falls back to the disk, with
// the rest of its time for the teardown.
const checkpointTimeout = 2 * time.Minute

// checkpointForSleep saves rec's running sandbox into memoryDir when its backend can, and
// deletes the container it leaves. It returns the sleep record to keep: memory on success,
// else disk with the reason. The caller holds the ID lock and tears the rest down afterwards
// (teardown finds no container after a successful checkpoint; after a failed one, the agent
// still runs and saves its sessions when teardown stops it).
func (m *Manager) checkpointForSleep(ctx context.Context, rec store.Sandbox, inst *instance) sleepRecord {
	disk := func(note string) sleepRecord {
		return sleepRecord{Mode: SleepModeDisk, Note: note, At: time.Now().UTC()}
	}
	if m.cfg.NoSleepMemory {
		return disk("memory sleeps are off on this host (hutchd --sleep-memory off): processes were stopped and do not restart on wake (only the disk was kept)")
	}
	rt, err := m.runtimeOf(rec)
	if err != nil {
		return disk("runtime " + rec.Runtime + " is not available on this host: processes were stopped and do not restart on wake (only the disk was kept)")
	}
	cp, ok := rt.(runtime.Checkpointer)
	if !ok {
		return disk("runtime " + rt.Name() + " cannot checkpoint memory: processes were stopped and do not restart on wake (only the disk was kept)")
	}
	if err := cp.CheckpointSupport(); err != nil {
		return disk(err.Error() + "; processes were stopped and do not restart on wake (only the disk was kept)")
	}
	if inst == nil || inst.agentBin == "" {
		return disk("the sandbox was not started by this hutchd's records (no agent binary recorded): processes were stopped and do not restart on wake (only the disk was kept)")
	}
	dir := m.memoryDir(rec.ID)
	if err := os.RemoveAll(dir); err != nil {
		return disk("memory image: " + err.Error())
	}
	if note := m.imageRoom(rt, rec); note != "" {
		return disk(note + ": processes were stopped and do not restart on wake (only the disk was kept)")
	}
	// Sessions (cwd, environment) go to the disk first, as a disk sleep's shutdown saves them:
	// a wake that cannot restore the memory, or a stop after this sleep, still finds them.
	if err := saveSessions(ctx, inst.agent); err != nil {
		m.log.WarnContext(ctx, "save sessions before checkpoint", "sandbox_id", rec.ID, "err", err)
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
	err = cp.Checkpoint(cctx, rec.ID, dir)
	cancel()
	if err != nil {
		if rerr := os.RemoveAll(dir); rerr != nil {
			m.log.WarnContext(ctx, "remove failed checkpoint", "sandbox_id", rec.ID, "err", rerr)
		}
		m.log.WarnContext(ctx, "checkpoint failed, sleeping with the disk only", "sandbox_id", rec.ID, "err", err)
		return disk("gVisor could not checkpoint the sandbox (" + err.Error() + "): processes were stopped and do not restart on wake (only the disk was kept)")
	}
	took := time.Since(start)
	// The saved sandbox exits; its container is removed here so that teardown does not signal it.
	if err := rt.Delete(ctx, rec.ID, true); err != nil {
		m.log.WarnContext(ctx, "delete checkpointed container", "sandbox_id", rec.ID, "err", err)
	}
	var size int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	m.log.InfoContext(ctx, "sandbox checkpointed", "sandbox_id", rec.ID, "took", took.Round(time.Millisecond), "image_bytes", size)
	return sleepRecord{Mode: SleepModeMemory, AgentBin: inst.agentBin, At: start.UTC(), Took: took}
}

// runContainer starts spec's container and waits for its agent. A sandbox that went to sleep
// with a memory image (wasSleeping, and a memory sleep record) is restored from it instead,
// with the hutch-init binary it ran; when the restore or its agent fails, the image is
// discarded and the container starts afresh. It returns the state, the instance's agent
// binary and whether the sandbox was restored. On error no container is left running.
func (m *Manager) runContainer(ctx context.Context, rt runtime.Runtime, spec runtime.Spec, wasSleeping bool, tr interface{ CloseIdleConnections() }, wait func() error) (runtime.State, string, bool, error) {
	id := spec.ID
	if sr, ok := m.readSleepRecord(id); ok && sr.Mode == SleepModeMemory && wasSleeping {
		// Marked before the restore, not consumed: when hutchd dies during it, Recover finds
		// the mark and either adopts the restored sandbox or, when it never ran, keeps the
		// image for the next wake. An image is still restored at most once: a restored
		// sandbox that ran on (its disk moved on from the image's) loses the image.
		sr.Restoring = true
		if err := m.writeSleepRecord(id, sr); err != nil {
			m.discardMemory(ctx, id)
			return runtime.State{}, "", false, fmt.Errorf("mark sleep record: %w", err)
		}
		if st, err := m.restore(ctx, rt, spec, sr); err != nil {
			m.log.WarnContext(ctx, "restore failed, starting afresh", "sandbox_id", id, "err", err)
		} else if err := wait(); err != nil {
			tr.CloseIdleConnections()
			m.log.WarnContext(ctx, "restored agent does not answer, starting afresh", "sandbox_id", id, "err", err)
			if derr := rt.Delete(ctx, id, true); derr != nil {
				m.discardMemory(ctx, id)
				return runtime.State{}, "", false, fmt.Errorf("delete restored container: %w", derr)
			}
		} else {
			m.discardMemory(ctx, id)
			return st, sr.AgentBin, true, nil
		}
	}
	m.discardMemory(ctx, id)
	st, err := rt.Start(ctx, spec)
	if err != nil {
		return runtime.State{}, "", false, fmt.Errorf("runtime %s: %w", rt.Name(), err)
	}
	return st, m.agentPath, false, nil
}

// restore restores id from its memory image with spec, its agent binary replaced by the one
// the image runs.
func (m *Manager) restore(ctx context.Context, rt runtime.Runtime, spec runtime.Spec, sr sleepRecord) (runtime.State, error) {
	cp, ok := rt.(runtime.Checkpointer)
	if !ok {
		return runtime.State{}, fmt.Errorf("runtime %s cannot restore", rt.Name())
	}
	if err := cp.CheckpointSupport(); err != nil {
		return runtime.State{}, err
	}
	if fi, err := os.Stat(sr.AgentBin); err != nil {
		return runtime.State{}, fmt.Errorf("agent binary of the image: %w", err)
	} else if !fi.Mode().IsRegular() {
		return runtime.State{}, fmt.Errorf("agent binary of the image %q is not a regular file", sr.AgentBin)
	}
	spec.Mounts = slices.Clone(spec.Mounts)
	for i, mt := range spec.Mounts {
		if mt.Destination == agentInContainer {
			spec.Mounts[i].Source = sr.AgentBin
		}
	}
	start := time.Now()
	st, err := cp.Restore(ctx, spec, m.memoryDir(spec.ID))
	if err != nil {
		return runtime.State{}, err
	}
	m.log.InfoContext(ctx, "sandbox restored from memory", "sandbox_id", spec.ID, "took", time.Since(start).Round(time.Millisecond), "asleep_since", sr.At)
	return st, nil
}

// imageReserve is the free space a memory image must leave on the file system that holds it:
// the larger of imageReserveMin and imageReserveShare of its size. Sandboxes' disks and other
// images share that file system (the data volume); an image must not take the room their
// writes need.
const (
	imageReserveMin   = 1 << 30
	imageReserveShare = 10 // percent
)

// imageRoom returns "" when the file system of rec's sandbox dir has room for its memory image
// (the memory its cgroup uses, page cache included, an upper bound of the image) and keeps
// imageReserve free after it; else why not. Without a reading of the cgroup, the instance
// type's memory limit counts.
func (m *Manager) imageRoom(rt runtime.Runtime, rec store.Sandbox) string {
	need := int64(-1)
	if cg, ok := rt.(interface{ CgroupDirs(id string) []string }); ok {
		need = cgroupMemory(cg.CgroupDirs(rec.ID))
	}
	if need < 0 {
		it, err := LookupInstanceType(rec.InstanceType)
		if err != nil {
			return err.Error()
		}
		need = it.MemoryBytes
	}
	var st unix.Statfs_t
	if err := unix.Statfs(m.sandboxDir(rec.ID), &st); err != nil {
		return "free space for a memory image: " + err.Error()
	}
	free, size := int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize
	reserve := max(int64(imageReserveMin), size*imageReserveShare/100)
	if free-need < reserve {
		return fmt.Sprintf("not enough free space for a memory image (%d MiB needed, %d MiB free, %d MiB kept for the disks of sandboxes)", need>>20, free>>20, reserve>>20)
	}
	return ""
}

// cgroupMemory reads the memory a cgroup uses, in bytes, from the first of dirs that has it
// (ocispec.MemoryFiles); -1 when none does.
func cgroupMemory(dirs []string) int64 {
	usage, _, ok := ocispec.MemoryFiles(dirs)
	if !ok {
		return -1
	}
	n, err := ocispec.ReadInt(usage)
	if err != nil {
		return -1
	}
	return n
}

// saveSessions asks the agent to write its sessions to the disk now (agentapi.SaveSessions),
// within 10 s.
func saveSessions(ctx context.Context, agent *agentclient.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := agent.SaveSessions(ctx)
	return err
}
