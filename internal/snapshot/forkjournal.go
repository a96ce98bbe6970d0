package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// The fork journal. A fork creates its sandboxes after its snapshot; a hutchd killed in
// between leaves some of them made, and the caller got no answer. The fork is rolled back,
// as a failed one is: before creating, Fork writes <ForkJournal>/<source>.json with the
// forks' IDs and the snapshot, and removes it when it returns; RecoverForks, at the next
// start, destroys every sandbox a journal names that was made from its snapshot. The
// snapshot itself stays: it is content-addressed, so it may be one the user made before.

// forkJournal is one journal file.
type forkJournal struct {
	Source   string   `json:"source"`
	Snapshot string   `json:"snapshot"`
	Forks    []string `json:"forks"`
}

func (s *Service) journalPath(source string) string {
	return filepath.Join(s.cfg.ForkJournal, source+".json")
}

// beginFork writes the journal of a fork of source into ids from snapshot snapID and returns
// the function that removes it. Without a journal directory it does nothing.
func (s *Service) beginFork(source, snapID string, ids []string) (func(), error) {
	if s.cfg.ForkJournal == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(s.cfg.ForkJournal, 0o700); err != nil {
		return nil, fmt.Errorf("fork journal: %w", err)
	}
	b, err := json.Marshal(forkJournal{Source: source, Snapshot: snapID, Forks: ids})
	if err != nil {
		return nil, fmt.Errorf("fork journal: %w", err)
	}
	p := s.journalPath(source)
	if err := os.WriteFile(p+".tmp", b, 0o600); err != nil {
		return nil, fmt.Errorf("fork journal: %w", err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return nil, fmt.Errorf("fork journal: %w", err)
	}
	return func() { _ = os.Remove(p) }, nil
}

// RecoverForks rolls back the forks a crash of hutchd cut short (see the fork journal): every
// sandbox a journal names whose disk was made from the journal's snapshot is destroyed, and
// the journal removed. Run it after sandbox.Manager.Recover, before requests are served.
func (s *Service) RecoverForks(ctx context.Context) error {
	if s.cfg.ForkJournal == "" {
		return nil
	}
	ents, err := os.ReadDir(s.cfg.ForkJournal)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fork journal: %w", err)
	}
	var errs []error
	for _, e := range ents {
		p := filepath.Join(s.cfg.ForkJournal, e.Name())
		if !strings.HasSuffix(e.Name(), ".json") {
			_ = os.Remove(p) // a journal whose write was cut short: no fork was begun
			continue
		}
		b, err := os.ReadFile(p)
		var j forkJournal
		if err == nil {
			err = json.Unmarshal(b, &j)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("fork journal %s: %w", e.Name(), err))
			continue
		}
		failed := false
		for _, id := range j.Forks {
			// The journal is a file on disk: its IDs are checked like any other.
			sid, err := sandboxid.Parse(id)
			var info sandbox.Info
			if err == nil {
				info, err = s.cfg.Sandboxes.Get(ctx, sid)
			}
			if errdefs.IsCode(err, errdefs.CodeSandboxNotFound) || (err == nil && info.Snapshot != j.Snapshot) {
				continue // not made, or not this fork's
			}
			if err == nil {
				err = s.cfg.Sandboxes.Destroy(ctx, sid)
			}
			if err != nil {
				failed = true
				errs = append(errs, fmt.Errorf("roll back fork %s of %s: %w", id, j.Source, err))
				continue
			}
			s.log.WarnContext(ctx, "rolled back a fork cut short", "sandbox_id", id, "source", j.Source, "snapshot", j.Snapshot)
		}
		if !failed {
			_ = os.Remove(p)
		}
	}
	return errors.Join(errs...)
}
