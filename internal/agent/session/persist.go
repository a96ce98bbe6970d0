package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Saved sessions. When the agent shuts down (the sandbox sleeps or stops) it saves every
// listed session's cwd and environment to Config.SaveFile on the sandbox's own disk; the next
// agent (after a wake or start) loads them in NewManager, so named sessions come back with their
// cwd and exported variables. The environment is saved as the difference from the sandbox's
// base environment (variables set or changed, names unset), so a base that changes between runs
// (say, a new CA variable) still reaches every session. The file is removed once loaded: it
// describes one shutdown, and a later crash of the agent must not bring back sessions deleted
// since. Running commands are not saved (they are killed at shutdown).

// savedVersion is the format version of the file.
const savedVersion = 1

type savedFile struct {
	Version  int            `json:"version"`
	Sessions []savedSession `json:"sessions"`
}

type savedSession struct {
	ID    string            `json:"id"`
	Cwd   string            `json:"cwd"`
	Env   map[string]string `json:"env,omitempty"`   // set or changed relative to the base env
	Unset []string          `json:"unset,omitempty"` // base variables the session unset
}

// Save writes every listed session (ID, cwd, environment) to Config.SaveFile: mode 0600,
// written to a temporary file, synced and renamed over the old one, so a crash leaves the old
// file or the new one. It returns the number of sessions saved; with no SaveFile it does
// nothing.
func (m *Manager) Save() (int, error) {
	if m.saveFile == "" {
		return 0, nil
	}
	m.mu.Lock()
	ss := slices.Collect(maps.Values(m.sessions))
	m.mu.Unlock()
	f := savedFile{Version: savedVersion, Sessions: make([]savedSession, 0, len(ss))}
	for _, s := range ss {
		s.mu.Lock()
		if !s.deleted {
			f.Sessions = append(f.Sessions, m.diff(s.id, s.cwd, s.env))
		}
		s.mu.Unlock()
	}
	slices.SortFunc(f.Sessions, func(a, b savedSession) int { return strings.Compare(a.ID, b.ID) })
	data, err := json.Marshal(f)
	if err != nil {
		return 0, fmt.Errorf("session: save: %w", err)
	}
	if err := writeFileAtomic(m.saveFile, data); err != nil {
		return 0, fmt.Errorf("session: save: %w", err)
	}
	return len(f.Sessions), nil
}

func (m *Manager) diff(id, cwd string, env map[string]string) savedSession {
	ss := savedSession{ID: id, Cwd: cwd, Env: map[string]string{}}
	for k, v := range env {
		if bv, ok := m.baseEnv[k]; !ok || bv != v {
			ss.Env[k] = v
		}
	}
	for k := range m.baseEnv {
		if _, ok := env[k]; !ok {
			ss.Unset = append(ss.Unset, k)
		}
	}
	slices.Sort(ss.Unset)
	return ss
}

// load restores the sessions saved in m.saveFile and removes the file. A missing file loads
// nothing; an unreadable or malformed file, or an invalid entry, is logged and skipped. It runs
// in NewManager, before any shell is warmed.
func (m *Manager) load() {
	if m.saveFile == "" {
		return
	}
	data, err := os.ReadFile(m.saveFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	defer os.Remove(m.saveFile)
	if err != nil {
		m.log.Warn("saved sessions unreadable", "path", m.saveFile, "err", err)
		return
	}
	var f savedFile
	if err := json.Unmarshal(data, &f); err != nil || f.Version != savedVersion {
		m.log.Warn("saved sessions malformed", "path", m.saveFile, "err", err, "version", f.Version)
		return
	}
	n := 0
	for _, ss := range f.Sessions {
		if ValidateID(ss.ID) != nil || !filepath.IsAbs(ss.Cwd) || strings.ContainsRune(ss.Cwd, 0) {
			m.log.Warn("saved session skipped", "session", ss.ID, "cwd", ss.Cwd)
			continue
		}
		env := maps.Clone(m.baseEnv)
		for _, k := range ss.Unset {
			delete(env, k)
		}
		for k, v := range ss.Env {
			if k != "" && k != MarkerEnv && !strings.ContainsAny(k, "=\x00") && !strings.ContainsRune(v, 0) {
				env[k] = v
			}
		}
		s := m.def
		if ss.ID == DefaultID {
			s.cwd, s.env = filepath.Clean(ss.Cwd), env
		} else {
			s = &Session{id: ss.ID, run: make(chan struct{}, 1), cwd: filepath.Clean(ss.Cwd), env: env}
		}
		s.used = m.useSeq.Add(1)
		m.sessions[ss.ID] = s
		n++
	}
	m.log.Info("sessions restored", "count", n)
}

// writeFileAtomic writes data to path with mode 0600 through a synced temporary file in the
// same directory (created 0700 if missing) and a rename, then syncs the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
