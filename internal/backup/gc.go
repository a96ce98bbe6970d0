package backup

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// GCStats counts what one GC run removed.
type GCStats struct {
	Expired int `json:"expired"` // backups past their expiresAt (row, meta and archive)
	Orphans int `json:"orphans"` // archives without meta older than Config.OrphanAge
	Stale   int `json:"stale"`   // rows whose meta and archive are gone (removed elsewhere)
	Temps   int `json:"temps"`   // temp files of killed uploads (local store), unwritten for OrphanAge
	Trees   int `json:"trees"`   // cached trees no sandbox mounts, unused for OrphanAge
}

// GC removes expired backups, archives without meta (a Create that failed or was killed part
// way) older than Config.OrphanAge, rows whose blobs are both gone, and (local store) temp
// files of uploads not written to for Config.OrphanAge, and cached trees (Trees) that no
// sandbox mounts and nobody used for Config.OrphanAge. Archives of backups
// being created by this Service are never touched. It goes on after a failed removal and
// returns the errors joined.
func (s *Service) GC(ctx context.Context) (GCStats, error) {
	var st GCStats
	now := s.cfg.Now()
	infos, err := s.cfg.Blobs.List(ctx, "backups/")
	if err != nil {
		return st, err
	}
	archives := map[string]time.Time{} // id → ModTime
	metas := map[string]bool{}
	for _, in := range infos {
		name := strings.TrimPrefix(in.Key, "backups/")
		if id, ok := strings.CutSuffix(name, ".tar.zst"); ok && validID(id) {
			archives[id] = in.ModTime
		} else if id, ok := strings.CutSuffix(name, ".json"); ok && validID(id) {
			metas[id] = true
		}
	}
	var errs []error
	rows, err := s.cfg.Store.ListBackups(ctx, "")
	if err != nil {
		return st, err
	}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.ID] = true
		_, hasArchive := archives[r.ID]
		switch {
		case now.After(r.ExpiresAt):
			if err := s.remove(ctx, r.ID); err != nil {
				errs = append(errs, err)
				continue
			}
			st.Expired++
			delete(metas, r.ID)
			delete(archives, r.ID)
		case !metas[r.ID] && !hasArchive && !s.isInflight(r.ID):
			if err := s.cfg.Store.DeleteBackup(ctx, r.ID); err != nil {
				errs = append(errs, err)
				continue
			}
			st.Stale++
		}
	}
	for id := range metas {
		if seen[id] {
			continue
		}
		m, err := s.readMeta(ctx, id)
		if err != nil {
			if errdefs.CodeOf(err) != errdefs.CodeBackupNotFound {
				errs = append(errs, err)
			}
			continue
		}
		if now.After(m.ExpiresAt) {
			if err := s.remove(ctx, id); err != nil {
				errs = append(errs, err)
				continue
			}
			st.Expired++
			delete(metas, id)
			delete(archives, id)
		}
	}
	for id, mod := range archives {
		if metas[id] || s.isInflight(id) || now.Sub(mod) < s.cfg.OrphanAge {
			continue
		}
		if err := s.cfg.Blobs.Delete(ctx, archiveKey(id)); err != nil {
			errs = append(errs, err)
			continue
		}
		st.Orphans++
	}
	// A local store's temp files of uploads nobody writes to any more (a killed hutchd).
	if l, ok := s.cfg.Blobs.(interface {
		RemoveStaleTemp(ctx context.Context, olderThan time.Duration) (int, error)
	}); ok {
		n, err := l.RemoveStaleTemp(ctx, s.cfg.OrphanAge)
		if err != nil {
			errs = append(errs, err)
		}
		st.Temps = n
	}
	// Extracted trees no sandbox mounts (a mounted one stays, even when its backup is gone).
	if s.trees != nil {
		used, err := s.cfg.Store.MountedBackups(ctx)
		if err == nil {
			var removed []string
			removed, err = s.trees.GC(ctx, used, s.cfg.OrphanAge)
			st.Trees = len(removed)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if st != (GCStats{}) {
		s.log.InfoContext(ctx, "backup gc", "expired", st.Expired, "orphans", st.Orphans, "stale", st.Stale, "temps", st.Temps, "trees", st.Trees)
	}
	return st, errors.Join(errs...)
}

// RunGC runs GC every interval until ctx ends, logging failures.
func (s *Service) RunGC(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.GC(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "backup gc failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
