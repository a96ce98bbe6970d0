package ocispec

import (
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/internal/idmap"
)

// userNS puts the container in a user namespace of its own whose IDs [0, m.Size) are host IDs
// [m.Base, m.Base+m.Size). The spec asks the runtime to create it; JoinUserNS makes it join one
// made beforehand instead.
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

// JoinUserNS makes spec's container join the existing user namespace at path (a file of
// /proc/<pid>/ns/user or /proc/<pid>/fd/<n>) instead of creating one: a namespace whose
// mappings are spec's (idmap.Map.ContainerUserNS). runc joins the user namespace first and
// creates or joins the others from inside it, where it has no rights over a network namespace
// the host owns (setns: EPERM). Such a network namespace is therefore taken out of the spec and
// its path returned: the caller starts the runtime inside it, and the container,
// making no network namespace of its own, keeps that one.
func JoinUserNS(spec *specs.Spec, path string) (netns string, _ error) {
	found := false
	var keep []specs.LinuxNamespace
	for _, ns := range spec.Linux.Namespaces {
		switch {
		case ns.Type == specs.UserNamespace:
			ns.Path = path
			found = true
		case ns.Type == specs.NetworkNamespace && ns.Path != "":
			netns = ns.Path
			continue
		}
		keep = append(keep, ns)
	}
	if !found {
		return "", fmt.Errorf("oci spec: no user namespace to join")
	}
	spec.Linux.Namespaces = keep
	return netns, nil
}
