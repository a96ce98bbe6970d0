package process

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A process's files in the Manager's directory: <id>.json (its record) and <id>.stdout,
// <id>.stderr (the held bytes of each stream). Each is written to a temporary file that is
// then renamed over it; leftover temporary files are removed at load.
const (
	recordSuffix = ".json"
	tmpSuffix    = ".tmp"
)

// errAgentRestarted is the Error of a record found running at load.
const errAgentRestarted = "agent restarted while the process ran"

// span is the held range of one stream: bytes [Offset, End).
type span struct {
	Offset int64 `json:"offset"`
	End    int64 `json:"end"`
}

// record is the JSON file of a process.
type record struct {
	Process        Info `json:"process"`
	LogBufferBytes int  `json:"logBufferBytes"`
	Stdout         span `json:"stdout"`
	Stderr         span `json:"stderr"`
}

func (m *Manager) recordPath(id string) string { return filepath.Join(m.dir, id+recordSuffix) }

func (m *Manager) logPath(id string, s Stream) string {
	return filepath.Join(m.dir, id+"."+s.String())
}

// persist saves p's record, and with final its held logs too (written first; the record is
// the commit point), after which p's logs are read from the files and hold no memory. Errors
// are logged: a process runs on without its record being saved.
func (m *Manager) persist(p *proc, final bool) {
	if m.dir == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.info.ID
	rec := record{
		Process: p.info, LogBufferBytes: p.logBytes,
		Stdout: span{p.logs[0].start, p.logs[0].end}, Stderr: span{p.logs[1].start, p.logs[1].end},
	}
	if final {
		for _, s := range []Stream{Stdout, Stderr} {
			r := p.logs[s]
			if r.buf == nil && r.file != "" {
				continue // already on disk
			}
			if err := writeAtomic(m.logPath(id, s), r.writeTo); err != nil {
				m.log.Warn("process log not saved", "process", id, "stream", s, "err", err)
				final = false
			}
		}
	}
	b, err := json.Marshal(rec)
	if err == nil {
		err = writeAtomic(m.recordPath(id), func(w io.Writer) error { _, err := w.Write(b); return err })
	}
	if err != nil {
		m.log.Warn("process record not saved", "process", id, "err", err)
		return
	}
	if final {
		for _, s := range []Stream{Stdout, Stderr} {
			p.logs[s].release(m.logPath(id, s))
		}
	}
}

// writeAtomic writes path through a temporary file in its directory, renamed over it.
func writeAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*"+tmpSuffix)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// writeTo writes the held bytes (in memory) to w.
func (r *ring) writeTo(w io.Writer) error {
	n := r.end - r.start
	if n == 0 {
		return nil
	}
	pos := int((r.start - r.base) % int64(r.size))
	first := r.buf[pos:min(len(r.buf), pos+int(n))]
	if _, err := w.Write(first); err != nil {
		return err
	}
	_, err := w.Write(r.buf[:int(n)-len(first)])
	return err
}

// load creates the directory or reads the records kept in it.
func (m *Manager) load() error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return fmt.Errorf("process: create %s: %w", m.dir, err)
	}
	if err := os.Chmod(m.dir, 0o700); err != nil {
		return fmt.Errorf("process: chmod %s: %w", m.dir, err)
	}
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return fmt.Errorf("process: read %s: %w", m.dir, err)
	}
	var loaded []*proc
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			_ = os.Remove(filepath.Join(m.dir, name))
		case strings.HasSuffix(name, recordSuffix):
			p, err := m.loadOne(strings.TrimSuffix(name, recordSuffix))
			if err != nil {
				m.log.Warn("process record skipped", "file", name, "err", err)
				continue
			}
			loaded = append(loaded, p)
		}
	}
	slices.SortFunc(loaded, func(a, b *proc) int {
		return cmp.Or(a.info.StartTime.Compare(b.info.StartTime), strings.Compare(a.info.ID, b.info.ID))
	})
	for _, p := range loaded {
		m.seq++
		p.seq = m.seq
		m.procs[p.info.ID] = p
	}
	return nil
}

// loadOne reads the record of process id and the size of its logs.
func (m *Manager) loadOne(id string) (*proc, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	b, err := readRecord(m.recordPath(id))
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	if rec.Process.ID != id {
		return nil, fmt.Errorf("record names process %q", rec.Process.ID)
	}
	size := rec.LogBufferBytes
	if size < MinLogBytes || size > MaxLogBytes {
		size = m.logBytes
	}
	if rec.Process.LogBufferBytes == 0 {
		rec.Process.LogBufferBytes = size
	}
	p := newProc(rec.Process, size, 0)
	for _, s := range []Stream{Stdout, Stderr} {
		sp := rec.Stdout
		if s == Stderr {
			sp = rec.Stderr
		}
		path := m.logPath(id, s)
		held, err := logSize(path)
		if err != nil {
			m.log.Warn("process log not loaded: its output is shown empty", "process", id, "stream", s, "err", err)
			path = ""
		}
		// The file is the truth for what is held, of which at most the last size bytes are
		// used; the record for where it ends.
		fileOff := max(0, held-int64(size))
		held -= fileOff
		end := max(max(sp.End, 0), held)
		p.logs[s] = &ring{size: size, base: end - held, start: end - held, end: end, file: path, fileOff: fileOff}
	}
	p.order = []seg{
		{stream: Stdout, ends: [2]int64{p.logs[0].end, p.logs[1].start}},
		{stream: Stderr, ends: [2]int64{p.logs[0].end, p.logs[1].end}},
	}
	if running(p.info) {
		p.info.Status, p.info.Error = StatusError, errAgentRestarted
		end := time.Now().UTC()
		p.info.EndTime, p.info.ExitCode = &end, nil
		m.persist(p, false)
	}
	close(p.started)
	close(p.done)
	return p, nil
}

// maxRecordBytes bounds a record file: a command line (a request body is at most 48 MiB)
// and a few fields.
const maxRecordBytes = 64 << 20

// readRecord reads a record file (a regular file, not through a symlink) of at most
// maxRecordBytes.
func readRecord(path string) ([]byte, error) {
	f, err := openLog(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRecordBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxRecordBytes)
	}
	return b, nil
}

// logSize returns the size of a kept log file: 0 when there is none; an error when it cannot
// be opened as a regular file without following a symlink.
func logSize(path string) (int64, error) {
	f, err := openLog(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// gcInterval is how often expired records are looked for.
func (m *Manager) gcInterval() time.Duration {
	return min(max(m.retention/4, 50*time.Millisecond), time.Minute)
}

// gcLoop removes expired records until Shutdown.
func (m *Manager) gcLoop() {
	defer close(m.gcDone)
	t := time.NewTicker(m.gcInterval())
	defer t.Stop()
	for {
		select {
		case <-m.stopGC:
			return
		case <-t.C:
			m.gc()
		}
	}
}

// gc removes the records (and files) of processes that ended more than the retention ago.
func (m *Manager) gc() {
	cutoff := time.Now().Add(-m.retention)
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, p := range m.procs {
		if !p.ended() {
			continue
		}
		info := p.snapshot()
		if info.EndTime == nil || info.EndTime.After(cutoff) {
			continue
		}
		delete(m.procs, id)
		p.free()
		if m.dir != "" {
			for _, path := range []string{m.recordPath(id), m.logPath(id, Stdout), m.logPath(id, Stderr)} {
				if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					m.log.Warn("expired process file not removed", "path", path, "err", err)
				}
			}
		}
	}
}
