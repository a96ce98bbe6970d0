package session

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync/atomic"
)

// maxWarm is how many sessions keep a warm shell (an idle bash of about 3 MB each): the most
// recently used ones.
const maxWarm = 16

// spawnStats counts how commands got their shell; tests read it.
type spawnStats struct {
	warm      atomic.Int64 // commands run by a warm shell
	cold      atomic.Int64 // commands that started their shell themselves
	discarded atomic.Int64 // warm shells found unfit at exec time
}

// prewarm starts the next shell of s in the background, with s's current env and cwd, unless s
// already has one (or one is starting), s is deleted, or the Manager is closed. The shell
// becomes s.warm; an Exec that comes while it starts waits for it (it is never slower than
// starting a shell itself).
func (m *Manager) prewarm(s *Session) {
	if m.closed.Load() {
		return
	}
	s.mu.Lock()
	if s.deleted || s.warm != nil || s.warming != nil {
		s.mu.Unlock()
		return
	}
	if _, ok := s.env["SECONDS"]; ok {
		// bash counts SECONDS from its start: such a session always gets a fresh shell.
		s.mu.Unlock()
		return
	}
	env, cwd := s.env, s.cwd
	done := make(chan struct{})
	s.warming = done
	s.mu.Unlock()
	m.warmWG.Add(1)
	go func() {
		// Exits once the shell is started and handed over (or discarded); Close waits for it.
		defer m.warmWG.Done()
		sh, err := spawnShell(env, cwd, m.stateDir, m.shim)
		s.mu.Lock()
		s.warming = nil
		keep := err == nil && !s.deleted && !m.closed.Load() && s.warm == nil
		if keep {
			s.warm = sh
		}
		s.mu.Unlock()
		close(done)
		if err != nil {
			if !m.closed.Load() { // after Close, the workdir may be gone: not worth a warning
				m.log.Debug("could not start a warm shell", "session", s.id, "err", err)
			}
			return
		}
		if !keep {
			m.discard(sh)
			return
		}
		m.trimWarm()
	}()
}

// takeWarm removes and returns s's warm shell, waiting (until ctx ends) for one that is being
// started. It returns nil when s has none.
func (m *Manager) takeWarm(ctx context.Context, s *Session) (*shell, error) {
	s.mu.Lock()
	sh, starting := s.warm, s.warming
	s.warm = nil
	s.mu.Unlock()
	if sh != nil || starting == nil {
		return sh, nil
	}
	select {
	case <-starting:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	s.mu.Lock()
	sh, s.warm = s.warm, nil
	s.mu.Unlock()
	return sh, nil
}

// warmFits reports whether the warm shell sh (nil: none) can run a command of a session whose
// state is env and cwd, with the per-command cmdEnv and cmdCwd: it is alive, it was started
// with this state and still sits in the directory cwd names, and cmdEnv can be exported.
func (m *Manager) warmFits(sh *shell, env map[string]string, cwd string, cmdEnv map[string]string, cmdCwd string) bool {
	if sh == nil || !sh.alive() || sh.cwd != cwd || !maps.Equal(sh.env, env) {
		return false
	}
	if _, ok := env["SECONDS"]; ok {
		return false
	}
	for k, v := range cmdEnv {
		if !exportable(k, v) {
			return false
		}
	}
	return cmdCwd != "" || sh.inDir(cwd)
}

// discard ends an idle shell and logs survivors.
func (m *Manager) discard(sh *shell) {
	if left := sh.discard(); left > 0 {
		m.log.Warn("processes survived the warm shell kill", "exec_id", sh.execID, "left", left)
	}
}

// trimWarm discards the warm shells of all but the maxWarm most recently used sessions.
func (m *Manager) trimWarm() {
	m.mu.Lock()
	if len(m.sessions) < maxWarm {
		m.mu.Unlock()
		return
	}
	ss := slices.Collect(maps.Values(m.sessions))
	if m.sessions[DefaultID] == nil {
		ss = append(ss, m.def)
	}
	m.mu.Unlock()
	type warmSession struct {
		s    *Session
		used uint64
	}
	var ws []warmSession
	for _, s := range ss {
		s.mu.Lock()
		if s.warm != nil {
			ws = append(ws, warmSession{s, s.used})
		}
		s.mu.Unlock()
	}
	if len(ws) <= maxWarm {
		return
	}
	slices.SortFunc(ws, func(a, b warmSession) int { return cmp.Compare(b.used, a.used) })
	for _, w := range ws[maxWarm:] {
		w.s.mu.Lock()
		sh := w.s.warm
		w.s.warm = nil
		w.s.mu.Unlock()
		if sh != nil {
			m.discard(sh)
		}
	}
}

// dropWarm removes and discards s's warm shell, if any.
func (m *Manager) dropWarm(s *Session) {
	s.mu.Lock()
	sh := s.warm
	s.warm = nil
	s.mu.Unlock()
	if sh != nil {
		m.discard(sh)
	}
}
