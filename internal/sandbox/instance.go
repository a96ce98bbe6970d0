package sandbox

import (
	"sort"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
)

// InstanceType is a named size. Limits are enforced through cgroups, not labels. Sizes follow
// the reference system (cloudflare-sandbox-api.md §2.5); disk quotas come with the hardening
// issue and are recorded here already.
type InstanceType struct {
	Name        string `json:"name"`
	MilliCPU    int64  `json:"milliCpu"`
	MemoryBytes int64  `json:"memoryBytes"`
	DiskBytes   int64  `json:"diskBytes"`
	Pids        int64  `json:"pids"`
}

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
	gb  = int64(1000 * 1000 * 1000)
)

// DefaultInstanceType is used when a create request names none.
const DefaultInstanceType = "standard-1"

var instanceTypes = map[string]InstanceType{
	"lite":       {"lite", 62, 256 * mib, 2 * gb, 512},
	"basic":      {"basic", 250, 1 * gib, 4 * gb, 1024},
	"standard-1": {"standard-1", 500, 4 * gib, 8 * gb, 2048},
	"standard-2": {"standard-2", 1000, 6 * gib, 12 * gb, 4096},
	"standard-3": {"standard-3", 2000, 8 * gib, 16 * gb, 4096},
	"standard-4": {"standard-4", 4000, 12 * gib, 20 * gb, 8192},
}

// LookupInstanceType returns the named type; "" gives the default. Unknown →
// INVALID_INSTANCE_TYPE.
func LookupInstanceType(name string) (InstanceType, error) {
	if name == "" {
		name = DefaultInstanceType
	}
	it, ok := instanceTypes[name]
	if !ok {
		return InstanceType{}, errdefs.Newf(errdefs.CodeInvalidInstance, "unknown instance type %q", name).With("instanceType", name).With("known", InstanceTypeNames())
	}
	return it, nil
}

// InstanceTypeNames lists the known names, sorted.
func InstanceTypeNames() []string {
	var out []string
	for n := range instanceTypes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Resources converts the type to runtime limits.
func (it InstanceType) Resources() runtime.Resources {
	return runtime.Resources{MilliCPU: it.MilliCPU, MemoryBytes: it.MemoryBytes, Pids: it.Pids}
}
