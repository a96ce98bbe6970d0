package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/daemontest"
)

// TestTokenHashMode runs a hutchd with --token-hash-file (the hash written by hutch token new):
// the token authenticates the SDK and the CLI (HUTCH_TOKEN), other tokens get 401
// UNAUTHENTICATED, the CLI without a token finds none, no file anywhere in the state directory
// holds the token (after a sandbox was created, used and stopped), and a restart with a
// plaintext <state>/token planted is refused with a clear error. The same daemon checks the
// upload bound (--max-upload-bytes) one byte past it.
func TestTokenHashMode(t *testing.T) {
	requireEnv(t)
	hashFile := filepath.Join(t.TempDir(), "token.sha256")
	hutch := filepath.Join(bins, "hutch")
	out, err := exec.Command(hutch, "token", "new", "--hash-file", hashFile).Output()
	if err != nil {
		t.Fatalf("hutch token new: %v", err)
	}
	tok := strings.TrimSpace(string(out))
	state, err := os.MkdirTemp("", "hutch-e2e-tokhash-")
	if err != nil {
		t.Fatal(err)
	}
	dm, err := daemontest.New(bins, state, filepath.Join(state, "hutchd.log"))
	if err != nil {
		t.Fatal(err)
	}
	dm.Args = []string{
		"--images-dir", imagesDir(),
		"--if-prefix", "hsh", "--netns-prefix", "hutchth-", "--nft-table", "hutchth", "--cgroup-parent", "hutchth",
		"--subnet", "10.83.0.0/16", "--dns-port", "39053", "--http-port", "39001", "--tls-port", "39002",
		"--preview-listen", "off", "--data-volume", "off", "--disk-quota", "off", "--log-level", "debug",
		"--token-hash-file", hashFile, "--max-upload-bytes", "1048576",
	}
	dm.Token = tok
	if err := dm.Start(context.Background()); err != nil {
		t.Fatalf("start hutchd: %v\n%s", err, dm.LogTail())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := dm.DestroyAll(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		dm.Stop()
		cleanupState(dm)
		// The daemon's (empty) cgroup parent, in every hierarchy (v1) or the one (v2).
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/hutchth")
		for _, dir := range append(dirs, "/sys/fs/cgroup/hutchth") {
			os.Remove(dir)
		}
	})
	ctx := ctxT(t, 4*time.Minute)

	sb, err := dm.Client().Sandbox(ctx, "tokhash", nil)
	if err != nil {
		t.Fatalf("create with the token: %v\n%s", err, dm.LogTail())
	}
	if _, err := sb.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	// The CLI: the token from HUTCH_TOKEN works; without it there is no token file to find.
	cli := func(token string) (string, int) {
		c := exec.Command(hutch, "list")
		c.Env = []string{"HUTCH_URL=" + dm.URL(), "HUTCH_STATE_DIR=" + state, "PATH=" + os.Getenv("PATH")}
		if token != "" {
			c.Env = append(c.Env, "HUTCH_TOKEN="+token)
		}
		b, _ := c.CombinedOutput()
		return string(b), c.ProcessState.ExitCode()
	}
	if out, code := cli(tok); code != 0 || !strings.Contains(out, "tokhash") {
		t.Errorf("hutch list with HUTCH_TOKEN: exit %d\n%s", code, out)
	}
	if out, code := cli(""); code == 0 || !strings.Contains(out, "UNAUTHENTICATED") {
		t.Errorf("hutch list without a token: exit %d\n%s; want UNAUTHENTICATED", code, out)
	}
	if out, code := cli(strings.Repeat("0", 64)); code == 0 || !strings.Contains(out, "UNAUTHENTICATED") {
		t.Errorf("hutch list with a wrong token: exit %d\n%s; want UNAUTHENTICATED", code, out)
	}

	// The API: only this token.
	hash, _ := os.ReadFile(hashFile)
	for _, bad := range []string{"", "wrong", tok[:63], tok + "0", strings.TrimSpace(string(hash)), strings.TrimPrefix(strings.TrimSpace(string(hash)), "sha256:")} {
		req, _ := http.NewRequest("GET", dm.URL()+"/v1/sandboxes", nil)
		if bad != "" {
			req.Header.Set("Authorization", "Bearer "+bad)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || env.Code != "UNAUTHENTICATED" {
			t.Errorf("token %q: %d %s; want 401 UNAUTHENTICATED", bad, resp.StatusCode, env.Code)
		}
	}

	// The upload bound (--max-upload-bytes 1 MiB), with bodies sent chunked: exactly 1 MiB
	// lands; 1 MiB + 1 byte is refused with 413 REQUEST_TOO_LARGE and leaves no file.
	if n, err := sb.WriteFileFrom(ctx, "/workspace/at-limit", bytes.NewReader(bytes.Repeat([]byte("u"), 1<<20))); err != nil || n != 1<<20 {
		t.Errorf("upload of exactly 1 MiB: %d, %v", n, err)
	}
	_, err = sb.WriteFileFrom(ctx, "/workspace/over-limit", bytes.NewReader(bytes.Repeat([]byte("u"), 1<<20+1)))
	if !errdefs.IsCode(err, errdefs.CodeRequestTooLarge) {
		t.Errorf("upload of 1 MiB + 1: %v; want REQUEST_TOO_LARGE", err)
	}
	if ok, err := sb.Exists(ctx, "/workspace/over-limit"); err != nil || ok {
		t.Errorf("the refused upload left a file: %v, %v", ok, err)
	}

	// No file of the state directory holds the token (the sandbox stopped: nothing mounted).
	if _, err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, "token")); err == nil {
		t.Errorf("hash mode wrote %s", filepath.Join(state, "token"))
	}
	if m := mountsUnder(state); len(m) > 0 {
		t.Fatalf("mounts left under the state dir of a stopped sandbox: %v", m)
	}
	files := 0
	err = filepath.WalkDir(state, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(b, []byte(tok)) || bytes.Contains(bytes.ToUpper(b), []byte(strings.ToUpper(tok))) {
			t.Errorf("%s holds the token", p)
		}
		return nil
	})
	if err != nil || files < 5 {
		t.Fatalf("walked %d files of %s: %v", files, state, err)
	}
	t.Logf("searched %d files of the state directory", files)

	// A plaintext token file in the state directory is refused at start, and left in place.
	dm.Stop()
	planted := filepath.Join(state, "token")
	if err := os.WriteFile(planted, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = dm.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "still holds the token in plaintext") {
		t.Errorf("start with a plaintext token file: %v; want a refusal naming it", err)
	}
	if _, serr := os.Stat(planted); serr != nil {
		t.Errorf("the refused start removed the token file: %v", serr)
	}
	os.Remove(planted)
	if err := dm.Start(context.Background()); err != nil {
		t.Fatalf("restart: %v\n%s", err, dm.LogTail())
	}
}
