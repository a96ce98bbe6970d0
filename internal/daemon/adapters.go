package daemon

import (
	"context"
	"io"

	"github.com/hutchdev/hutch/internal/egress"
	"github.com/hutchdev/hutch/internal/image"
	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/server"
)

// images adapts the image store to the sandbox manager (resolve, building the default image
// on first need) and to the API (list, build).
type images struct{ store *image.Store }

func (i images) Resolve(ctx context.Context, name string, progress io.Writer) (sandbox.Image, error) {
	img, err := i.store.ResolveOrBuild(ctx, name, progress)
	if err != nil {
		return sandbox.Image{}, err
	}
	return sandbox.Image{ID: img.ID, Name: img.Name, RootFS: img.RootFS}, nil
}

func (i images) List(ctx context.Context) ([]server.ImageInfo, error) {
	list, err := i.store.List()
	if err != nil {
		return nil, err
	}
	out := make([]server.ImageInfo, 0, len(list))
	for _, img := range list {
		out = append(out, imageInfo(img))
	}
	return out, nil
}

func (i images) Build(ctx context.Context, name string, progress io.Writer) (server.ImageInfo, error) {
	img, err := i.store.Build(ctx, name, progress)
	if err != nil {
		return server.ImageInfo{}, err
	}
	return imageInfo(img), nil
}

func imageInfo(img image.Image) server.ImageInfo {
	return server.ImageInfo{ID: img.ID, Name: img.Name, Packages: img.Packages, CreatedAt: img.CreatedAt, SizeBytes: img.SizeBytes}
}

// networks adapts netns.Manager to the sandbox manager.
type networks struct{ m *netns.Manager }

func (n networks) Setup(ctx context.Context, id string, slot int) (sandbox.Net, error) {
	x, err := n.m.Setup(ctx, id, slot)
	if err != nil {
		return sandbox.Net{}, err
	}
	return sandbox.Net{NSPath: x.NSPath, HostIf: x.HostIf, Gateway: x.Gateway, Addr: x.Addr}, nil
}

func (n networks) Teardown(ctx context.Context, id string, _ int) error { return n.m.Teardown(ctx, id) }

func (n networks) Sweep(ctx context.Context, keep map[string]int) error { return n.m.Sweep(ctx, keep) }

// egressAdapter adapts egress.Service to the sandbox manager.
type egressAdapter struct{ s *egress.Service }

func (e egressAdapter) AddSandbox(ctx context.Context, id string, n sandbox.Net) error {
	return e.s.AddSandbox(ctx, id, n.HostIf, n.Gateway, n.Addr)
}

func (e egressAdapter) RemoveSandbox(ctx context.Context, id string) error {
	return e.s.RemoveSandbox(ctx, id)
}

// overlay adapts package rootfs.
type overlay struct{}

func (overlay) Mount(lower, upper, work, merged string) error {
	return rootfs.Mount(lower, upper, work, merged)
}
func (overlay) Unmount(merged string) error             { return rootfs.Unmount(merged) }
func (overlay) Mounted(prefix string) ([]string, error) { return rootfs.ListMounts(prefix) }
