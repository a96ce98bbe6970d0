package process

import "fmt"

// Logs is the held output of a process.
type Logs struct {
	// Stdout and Stderr are the held bytes of each stream: bytes [Offset, End) of it.
	Stdout, Stderr []byte
	// StdoutOffset is the offset of the first held stdout byte (= bytes dropped from the
	// front), StdoutEnd the bytes written so far; the same for stderr.
	StdoutOffset, StdoutEnd int64
	StderrOffset, StderrEnd int64
	// LogBytes is the process's log buffer per stream.
	LogBytes int
	// Info is the record at the time the logs were taken.
	Info Info
}

// Logs returns the held output of process id. Errors: PROCESS_NOT_FOUND, or a failure to read
// a log kept on disk.
func (m *Manager) Logs(id string) (Logs, error) {
	p, err := m.lookup(id)
	if err != nil {
		return Logs{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := Logs{
		StdoutOffset: p.logs[0].start, StdoutEnd: p.logs[0].end,
		StderrOffset: p.logs[1].start, StderrEnd: p.logs[1].end,
		LogBytes: p.logBytes, Info: p.info,
	}
	if l.Stdout, err = p.logs[0].held(); err != nil {
		return Logs{}, fmt.Errorf("process %s: read stdout log: %w", id, err)
	}
	if l.Stderr, err = p.logs[1].held(); err != nil {
		return Logs{}, fmt.Errorf("process %s: read stderr log: %w", id, err)
	}
	return l, nil
}
