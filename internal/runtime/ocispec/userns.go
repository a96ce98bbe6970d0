package ocispec

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/internal/idmap"
)

// userNS puts the container in a user namespace of its own whose IDs [0, m.Size) are host IDs
// [m.Base, m.Base+m.Size).
func userNS(spec *specs.Spec, m idmap.Map) {
	spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
	mapping := []specs.LinuxIDMapping{{ContainerID: 0, HostID: m.Base, Size: m.Size}}
	spec.Linux.UIDMappings = mapping
	spec.Linux.GIDMappings = mapping
	// The network sysctls (IPv6 off) belong to the host-owned network namespace, which the
	// container's root cannot write; hutchd sets the same ones when it makes the namespace
	// (internal/netns), so the spec's copies go.
	spec.Linux.Sysctl = nil
	for i, mt := range spec.Mounts {
		if mt.Type == "sysfs" {
			// A user namespace may mount sysfs only when it owns the network namespace, and
			// the sandbox's netns belongs to the host (hutchd made it, with its veth). The
			// host's /sys instead, read-only; everything in it belongs to host IDs the range
			// has no rights over, and the masked paths cover the same places.
			spec.Mounts[i] = specs.Mount{Destination: "/sys", Type: "bind", Source: "/sys",
				Options: []string{"rbind", "rslave", "nosuid", "noexec", "nodev", "ro"}}
		}
	}
}
