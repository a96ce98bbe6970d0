package sandbox

import "testing"

// Recovery keeps a running sandbox's mounts except the read-only views a snapshot made, with or
// without a disk of its own.
func TestIsViewMount(t *testing.T) {
	for rest, want := range map[string]bool{
		"mounts/0123abcd/view":      true,  // a sandbox without a disk of its own
		"disk/mounts/0123abcd/view": true,  // on the sandbox's disk
		"disk/mounts/0123abcd":      false, // the directory mount's own directory
		"disk":                      false, // the disk itself
		"rootfs":                    false,
		"rootfs/mounts/x/view":      false,
		"disk/rootfs/mounts/x/view": false,
	} {
		if got := isViewMount(rest); got != want {
			t.Errorf("isViewMount(%q) = %v, want %v", rest, got, want)
		}
	}
}
