package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Setup creates (or completes) id's namespace and veth pair on the index-th /30 and returns
// it. Re-running it for an existing sandbox returns the same Net and repairs missing pieces
// (addresses, routes, link state, sysctls). Errors: errdefs.ErrInvalidArgument for a bad id or
// index; errdefs.ErrConflict when the host interface for index belongs to another sandbox or
// id already has a veth at another index; other errors are kernel failures. On failure nothing
// half-built is left behind for a namespace this call created.
func (m *Manager) Setup(ctx context.Context, id string, index int) (*Net, error) {
	if err := m.checkID(id); err != nil {
		return nil, err
	}
	gw, addr, err := Addrs(m.cfg.Subnet, index)
	if err != nil {
		return nil, err
	}
	n := &Net{ID: id, Index: index, NSPath: m.NSPath(id), HostIf: m.HostIf(index), Gateway: gw, Addr: addr}
	if len(n.HostIf) > maxIfName {
		return nil, fmt.Errorf("netns: interface name %q too long: %w", n.HostIf, errdefs.ErrInvalidArgument)
	}
	if err := m.checkOwnership(id, n.HostIf); err != nil {
		return nil, err
	}

	if err := ensureRunDir(); err != nil {
		return nil, err
	}
	mounted, err := isNSMount(n.NSPath)
	if err != nil {
		return nil, err
	}
	created := false
	if !mounted {
		// A stale plain file (crash between create and mount) is replaced.
		if err := removeNamed(n.NSPath); err != nil {
			return nil, err
		}
		if err := createNamed(n.NSPath); err != nil {
			return nil, err
		}
		created = true
	}
	if err := m.configure(ctx, n); err != nil {
		if created {
			if terr := m.Teardown(context.WithoutCancel(ctx), id); terr != nil {
				err = errors.Join(err, terr)
			}
		}
		return nil, err
	}
	m.log.DebugContext(ctx, "sandbox network ready", "sandbox_id", id, "host_if", n.HostIf, "gateway", gw, "addr", addr)
	return n, nil
}

// checkOwnership fails with ErrConflict when hostIf is another sandbox's veth, or when id
// already owns a veth under another name.
func (m *Manager) checkOwnership(id, hostIf string) error {
	links, err := linkList()
	if err != nil {
		return fmt.Errorf("netns: list links: %w", err)
	}
	for _, l := range links {
		a := l.Attrs()
		switch {
		case a.Name == hostIf && a.Alias != m.nsName(id):
			return fmt.Errorf("netns: interface %s is in use (alias %q): %w", hostIf, a.Alias, errdefs.ErrConflict)
		case a.Name != hostIf && a.Alias == m.nsName(id):
			return fmt.Errorf("netns: sandbox %s already has interface %s: %w", id, a.Name, errdefs.ErrConflict)
		}
	}
	return nil
}

// configure brings the veth pair and both ends' settings to the desired state.
func (m *Manager) configure(ctx context.Context, n *Net) error {
	ns, err := netns.GetFromPath(n.NSPath)
	if err != nil {
		return fmt.Errorf("netns: open %s: %w", n.NSPath, err)
	}
	defer ns.Close()
	inside, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netns: netlink handle in %s: %w", n.NSPath, err)
	}
	defer inside.Close()

	host, err := netlink.LinkByName(n.HostIf)
	var nf netlink.LinkNotFoundError
	switch {
	case errors.As(err, &nf):
		host = nil
	case err != nil:
		return fmt.Errorf("netns: look up %s: %w", n.HostIf, err)
	}
	peer, err := inside.LinkByName(SandboxIf)
	switch {
	case errors.As(err, &nf):
		peer = nil
	case err != nil:
		return fmt.Errorf("netns: look up %s in %s: %w", SandboxIf, n.NSPath, err)
	}
	// A pair whose ends do not match (one end missing, or the peer is someone else's) is
	// rebuilt from scratch.
	if host != nil && (peer == nil || host.Attrs().ParentIndex != peer.Attrs().Index) {
		if err := netlink.LinkDel(host); err != nil {
			return fmt.Errorf("netns: delete stale %s: %w", n.HostIf, err)
		}
		host = nil
	}
	if host == nil {
		if peer != nil {
			if err := inside.LinkDel(peer); err != nil {
				return fmt.Errorf("netns: delete stale %s in %s: %w", SandboxIf, n.NSPath, err)
			}
		}
		veth := &netlink.Veth{
			// The alias (which sandbox owns the link) is set in the same netlink request, so a
			// crash never leaves an anonymous veth that Teardown cannot find.
			LinkAttrs:     netlink.LinkAttrs{Name: n.HostIf, Alias: m.nsName(n.ID)},
			PeerName:      SandboxIf,
			PeerNamespace: netlink.NsFd(int(ns)),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("netns: create veth %s: %w", n.HostIf, err)
		}
		if host, err = netlink.LinkByName(n.HostIf); err != nil {
			return fmt.Errorf("netns: look up new %s: %w", n.HostIf, err)
		}
	}
	if err := m.configureHost(host, n); err != nil {
		return err
	}
	return configureInside(ns, inside, n)
}

func (m *Manager) configureHost(host netlink.Link, n *Net) error {
	if err := netlink.LinkSetAlias(host, m.nsName(n.ID)); err != nil {
		return fmt.Errorf("netns: alias %s: %w", n.HostIf, err)
	}
	if err := writeSysctlOptional("net/ipv6/conf/"+n.HostIf+"/disable_ipv6", "1"); err != nil {
		return err
	}
	if err := writeSysctl("net/ipv4/conf/"+n.HostIf+"/rp_filter", "1"); err != nil {
		return err
	}
	gw := &netlink.Addr{IPNet: &net.IPNet{IP: n.Gateway.AsSlice(), Mask: net.CIDRMask(30, 32)}}
	if err := netlink.AddrReplace(host, gw); err != nil {
		return fmt.Errorf("netns: address %s on %s: %w", n.Gateway, n.HostIf, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("netns: up %s: %w", n.HostIf, err)
	}
	return nil
}

func configureInside(ns netns.NsHandle, h *netlink.Handle, n *Net) error {
	err := inNS(ns, func() error {
		for _, k := range []string{"default", "all", "lo", SandboxIf} {
			if err := writeSysctlOptional("net/ipv6/conf/"+k+"/disable_ipv6", "1"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netns: lo in %s: %w", n.NSPath, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("netns: up lo in %s: %w", n.NSPath, err)
	}
	eth, err := h.LinkByName(SandboxIf)
	if err != nil {
		return fmt.Errorf("netns: %s in %s: %w", SandboxIf, n.NSPath, err)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: n.Addr.AsSlice(), Mask: net.CIDRMask(30, 32)}}
	if err := h.AddrReplace(eth, a); err != nil {
		return fmt.Errorf("netns: address %s in %s: %w", n.Addr, n.NSPath, err)
	}
	if err := h.LinkSetUp(eth); err != nil {
		return fmt.Errorf("netns: up %s in %s: %w", SandboxIf, n.NSPath, err)
	}
	def := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: n.Gateway.AsSlice(), Dst: defaultDst()}
	if err := h.RouteReplace(def); err != nil {
		return fmt.Errorf("netns: default route in %s: %w", n.NSPath, err)
	}
	return nil
}

func defaultDst() *net.IPNet {
	p := netip.MustParsePrefix("0.0.0.0/0")
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(0, 32)}
}
