package idmap

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/testutil"
)

func TestShift(t *testing.T) {
	m := Map{Base: 1 << 20, Size: 1 << 16}
	cases := []struct {
		host, sandbox int
		ok            bool
	}{
		{1 << 20, 0, true},
		{1<<20 + 1000, 1000, true},
		{1<<20 + 65535, 65535, true},
		{1<<20 + 65536, Overflow, false}, // the next range
		{1<<20 - 1, Overflow, false},
		{0, Overflow, false}, // host root is nobody inside
	}
	for _, c := range cases {
		got, ok := m.ToSandbox(c.host)
		if got != c.sandbox || ok != c.ok {
			t.Errorf("ToSandbox(%d) = %d,%v; want %d,%v", c.host, got, ok, c.sandbox, c.ok)
		}
		if c.ok {
			back, ok := m.ToHost(c.sandbox)
			if !ok || back != c.host {
				t.Errorf("ToHost(%d) = %d,%v; want %d", c.sandbox, back, ok, c.host)
			}
		}
	}
	for _, id := range []int{-1, 65536, 1 << 20} {
		if _, ok := m.ToHost(id); ok {
			t.Errorf("ToHost(%d) ok for an ID outside the range", id)
		}
	}
	var none Map
	if h, ok := none.ToHost(5); h != 5 || !ok || none.Enabled() || none.Root() != 0 {
		t.Errorf("zero Map shifts: %d %v", h, ok)
	}
	if m.Root() != 1<<20 {
		t.Errorf("Root = %d", m.Root())
	}
}

// TestMountIDMapped checks the kernel path end to end: a tree stored with in-sandbox owners
// appears shifted into two different ranges at once, the source keeps its owners, and the
// copy is read-only when asked.
func TestMountIDMapped(t *testing.T) {
	testutil.RequiresRoot(t, "user namespaces with arbitrary mappings, mounts")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(src, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(f, 1000, 5); err != nil {
		t.Fatal(err)
	}
	for i, m := range []Map{{Base: 1 << 20, Size: 1 << 16}, {Base: 1<<20 + 1<<16, Size: 1 << 16}} {
		ns, err := m.UserNS()
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "dst"+string(rune('a'+i)))
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		err = MountIDMapped(src, dst, ns, true)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(dst, unix.MNT_DETACH) })
		fi, err := os.Lstat(filepath.Join(dst, "f"))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != int(m.Base)+1000 || int(st.Gid) != int(m.Base)+5 {
			t.Errorf("range %d: owner %d:%d, want %d:%d", m.Base, st.Uid, st.Gid, m.Base+1000, m.Base+5)
		}
		if err := os.WriteFile(filepath.Join(dst, "new"), nil, 0o644); err == nil {
			t.Errorf("range %d: write into a read-only idmapped copy succeeded", m.Base)
		}
	}
	fi, err := os.Lstat(f)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 5 {
		t.Errorf("source owner changed to %d:%d", st.Uid, st.Gid)
	}
	m := Map{Base: 1 << 20, Size: 1 << 16}
	if err := m.Lchown(f, 0, 0); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(f); fi.Sys().(*syscall.Stat_t).Uid != 1<<20 {
		t.Errorf("Lchown: uid %d", fi.Sys().(*syscall.Stat_t).Uid)
	}
	if err := m.Lchown(f, 70000, 0); err == nil {
		t.Error("Lchown outside the range succeeded")
	}
}
