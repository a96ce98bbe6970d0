package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
)

// Teardown removes id's host veth (which takes its peer with it) and its named namespace,
// unmounting the bind mount. Absent pieces are not errors, so Teardown is idempotent and safe
// after a partial Setup. Processes still inside the namespace keep it alive (unnamed) until
// they exit, but it is no longer connected to the host.
func (m *Manager) Teardown(ctx context.Context, id string) error {
	if err := m.checkID(id); err != nil {
		return err
	}
	var errs []error
	links, err := linkList()
	if err != nil {
		errs = append(errs, fmt.Errorf("netns: list links: %w", err))
	}
	for _, l := range links {
		if l.Attrs().Alias != m.nsName(id) {
			continue
		}
		var nf netlink.LinkNotFoundError
		if err := netlink.LinkDel(l); err != nil && !errors.As(err, &nf) {
			errs = append(errs, fmt.Errorf("netns: delete %s: %w", l.Attrs().Name, err))
		}
	}
	if err := removeNamed(m.NSPath(id)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	m.log.DebugContext(ctx, "sandbox network removed", "sandbox_id", id)
	return nil
}

// List returns the sandbox IDs of the named namespaces in RunDir that carry NSPrefix, sorted.
// Use it with ListLinks to find leftovers after a crash.
func (m *Manager) List() ([]string, error) {
	ents, err := os.ReadDir(RunDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("netns: read %s: %w", RunDir, err)
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutPrefix(e.Name(), m.cfg.NSPrefix); ok && id != "" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// ListLinks returns the names of host links named "<IfPrefix><digits>", sorted.
func (m *Manager) ListLinks() ([]string, error) {
	links, err := linkList()
	if err != nil {
		return nil, fmt.Errorf("netns: list links: %w", err)
	}
	var names []string
	for _, l := range links {
		rest, ok := strings.CutPrefix(l.Attrs().Name, m.cfg.IfPrefix)
		if ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			names = append(names, l.Attrs().Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// Sweep removes every namespace and host link of ours (List, ListLinks) that does not belong
// to a sandbox in keep (sandbox ID → network index), for crash cleanup: what a killed hutchd
// left behind. It goes on past failures and returns them joined.
func (m *Manager) Sweep(ctx context.Context, keep map[string]int) error {
	var errs []error
	ids, err := m.List()
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		if _, ok := keep[id]; ok {
			continue
		}
		if err := m.Teardown(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	keepIf := map[string]bool{}
	for _, index := range keep {
		keepIf[m.HostIf(index)] = true
	}
	links, err := m.ListLinks()
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range links {
		if keepIf[name] {
			continue
		}
		l, err := netlink.LinkByName(name)
		if err != nil {
			continue // gone already (it went with its namespace)
		}
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete link %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
