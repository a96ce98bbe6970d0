package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// TestFilesThroughHutchd exercises the file API end to end, including a large streamed file.
func TestFilesThroughHutchd(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-files", &client.SandboxOptions{InstanceType: "lite"})
	ctx := ctxT(t, 5*time.Minute)

	if err := sb.WriteFile(ctx, "notes/hello.txt", []byte("héllo\n")); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "/workspace/notes/hello.txt")
	if err != nil || string(got.Content) != "héllo\n" || got.IsBinary {
		t.Fatalf("ReadFile = %+v, %v", got, err)
	}
	bin := []byte{0, 1, 2, 0xff, 0xfe, '\n'}
	if err := sb.WriteFile(ctx, "/workspace/b.bin", bin); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, "/workspace/b.bin"); err != nil || !bytes.Equal(got.Content, bin) || !got.IsBinary {
		t.Fatalf("binary ReadFile = %+v, %v", got, err)
	}

	// 64 MiB streamed both ways, byte-exact.
	big := make([]byte, 64<<20)
	rand.Read(big)
	want := sha256.Sum256(big)
	if n, err := sb.WriteFileFrom(ctx, "/workspace/big.bin", bytes.NewReader(big)); err != nil || n != int64(len(big)) {
		t.Fatalf("WriteFileFrom = %d, %v", n, err)
	}
	rc, meta, err := sb.OpenFile(ctx, "/workspace/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil || n != int64(len(big)) || !bytes.Equal(h.Sum(nil), want[:]) || meta.Size != int64(len(big)) {
		t.Fatalf("OpenFile: %d bytes, err %v, size %d, checksum match %v", n, err, meta.Size, bytes.Equal(h.Sum(nil), want[:]))
	}
	if out := mustExec(t, sb, "sha256sum /workspace/big.bin | cut -d' ' -f1"); strings.TrimSpace(out) != hexSum(want[:]) {
		t.Fatalf("checksum inside the sandbox = %s", out)
	}
	if _, err := sb.ReadFile(ctx, "/workspace/big.bin"); !errdefs.IsCode(err, errdefs.CodeFileTooLarge) {
		t.Fatalf("ReadFile of 64 MiB = %v; want FILE_TOO_LARGE", err)
	}

	if err := sb.Mkdir(ctx, "/workspace/a/b/c", true); err != nil {
		t.Fatal(err)
	}
	if err := sb.RenameFile(ctx, "/workspace/notes/hello.txt", "/workspace/a/b/c/hi.txt"); err != nil {
		t.Fatal(err)
	}
	if ok, err := sb.Exists(ctx, "/workspace/a/b/c/hi.txt"); err != nil || !ok {
		t.Fatalf("Exists after rename = %v, %v", ok, err)
	}
	list, err := sb.ListFiles(ctx, "/workspace/a", &client.ListOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list {
		names = append(names, f.RelativePath)
	}
	if !strings.Contains(strings.Join(names, ","), "b/c/hi.txt") {
		t.Fatalf("ListFiles = %v", names)
	}
	if err := sb.DeleteFile(ctx, "/workspace/a", false); !errdefs.IsCode(err, errdefs.CodeIsDirectory) {
		t.Fatalf("DeleteFile(dir) = %v; want IS_DIRECTORY", err)
	}
	if _, err := sb.ReadFile(ctx, "/workspace/nope"); !errors.Is(err, errdefs.ErrNotFound) || !errdefs.IsCode(err, errdefs.CodeFileNotFound) {
		t.Fatalf("ReadFile(missing) = %v; want FILE_NOT_FOUND", err)
	}
}

// TestStopStartKeepsDisk: a stopped sandbox starts again on the next operation with its files.
func TestStopStartKeepsDisk(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-stop", &client.SandboxOptions{InstanceType: "lite", EnvVars: map[string]string{"GREETING": "hi"}})
	ctx := ctxT(t, 5*time.Minute)
	if err := sb.WriteFile(ctx, "/workspace/keep.txt", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	mustExec(t, sb, "apt-get --version >/dev/null; echo data > /root/outside-workspace.txt")
	info, err := sb.Stop(ctx)
	if err != nil || info.Status != "stopped" {
		t.Fatalf("Stop = %+v, %v", info, err)
	}
	if n := countRuncContainers(t, "e2e-stop"); n != 0 {
		t.Fatalf("a stopped sandbox still has %d containers", n)
	}
	// Any operation starts it again.
	if got := mustExec(t, sb, "cat /workspace/keep.txt /root/outside-workspace.txt; echo $GREETING"); got != "keptdata\nhi\n" {
		t.Fatalf("after restart = %q", got)
	}
	if info, err := sb.Info(ctx); err != nil || info.Status != "running" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
}

// TestImagesShared: sandboxes share one content-addressed image and each has its own disk.
func TestImagesShared(t *testing.T) {
	requireEnv(t)
	parallel(t)
	a := sandbox(t, "e2e-img-a", &client.SandboxOptions{InstanceType: "lite"})
	b := sandbox(t, "e2e-img-b", &client.SandboxOptions{InstanceType: "lite"})
	ia, err := a.Info(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ib, err := b.Info(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if ia.ImageID == "" || ia.ImageID != ib.ImageID {
		t.Fatalf("image IDs %q and %q; want one shared ID", ia.ImageID, ib.ImageID)
	}
	mustExec(t, a, "echo mine > /etc/only-in-a")
	if got := mustExec(t, b, "cat /etc/only-in-a 2>/dev/null || echo absent"); got != "absent\n" {
		t.Fatalf("b sees a's write: %q", got)
	}
	// The image itself is untouched.
	if _, err := exec.Command("test", "-e", filepath.Join(imagesDir(), ia.ImageID, "rootfs", "etc", "only-in-a")).CombinedOutput(); err == nil {
		t.Fatal("a write in a sandbox reached the shared image")
	}
}

// TestGitCheckoutErrors: git failures come back as typed errors through hutchd.
func TestGitCheckoutErrors(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-git", &client.SandboxOptions{InstanceType: "lite"})
	ctx := ctxT(t, 2*time.Minute)
	// A local bare repository inside the sandbox.
	mustExec(t, sb, "git init -q --bare /srv/repo.git && git init -q /tmp/w && cd /tmp/w && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && git push -q /srv/repo.git HEAD:refs/heads/main")
	res, err := sb.GitCheckout(ctx, "file:///srv/repo.git", &client.GitCheckoutOptions{TargetDir: "/workspace/r", Branch: "main"})
	if err != nil || res.Branch != "main" {
		t.Fatalf("GitCheckout = %+v, %v", res, err)
	}
	tests := []struct {
		url, branch, dir string
		want             errdefs.Code
	}{
		{"file:///srv/missing.git", "", "/workspace/m1", errdefs.CodeGitRepoNotFound},
		{"file:///srv/repo.git", "nope", "/workspace/m2", errdefs.CodeGitBranchNotFound},
		{"file:///srv/repo.git", "", "/workspace/r", errdefs.CodeGitTargetExists},
		{"--upload-pack=touch /tmp/pwned", "", "/workspace/m3", errdefs.CodeInvalidGitURL},
		{"ext::sh -c touch% /tmp/pwned", "", "/workspace/m4", errdefs.CodeInvalidGitURL},
		{"http://unknown-host.invalid/x.git", "", "/workspace/m5", errdefs.CodeGitNetwork},
	}
	for _, tt := range tests {
		_, err := sb.GitCheckout(ctx, tt.url, &client.GitCheckoutOptions{Branch: tt.branch, TargetDir: tt.dir})
		if !errdefs.IsCode(err, tt.want) {
			t.Errorf("GitCheckout(%q, %q) = %v; want %s", tt.url, tt.branch, err, tt.want)
		}
	}
	if got := mustExec(t, sb, "test -e /tmp/pwned && echo pwned || echo clean"); got != "clean\n" {
		t.Fatal("a smuggled git option ran a command")
	}
}

func hexSum(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, len(b)*2)
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// TestAgentCrashRecovers: sandbox code kills its own agent (the container stops); the next
// operation finds the container gone, restarts the sandbox and succeeds, with the disk intact.
func TestAgentCrashRecovers(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-crash", &client.SandboxOptions{InstanceType: "lite"})
	ctx := ctxT(t, 2*time.Minute)
	if err := sb.WriteFile(ctx, "/workspace/before.txt", []byte("still here")); err != nil {
		t.Fatal(err)
	}
	// Kill the agent's server process; this call itself loses its connection.
	sb.Exec(ctx, "kill -9 $(pgrep -f 'hutch-init serve')", nil)
	testutil.Poll(t, 100*time.Millisecond, 30*time.Second, func() bool {
		return countRuncContainers(t, "e2e-crash") == 0 || runcContainers(t)["e2e-crash"] != "running"
	})
	// The call reaches this sandbox (restarted), never another one.
	other := sandbox(t, "e2e-crash-other", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, other, "true")
	got := mustExec(t, sb, "hostname; cat /workspace/before.txt")
	if got != "e2e-crash\nstill here" {
		t.Fatalf("after the agent crash = %q", got)
	}
}
