package e2e

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/daemontest"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/sparse"
)

// credsDaemon starts the credential scenario's own hutchd (egress_harness_test.go).
func credsDaemon(t *testing.T, inet *egresstest.Internet) *daemontest.Daemon {
	return egressDaemon(t, inet, egressDaemonNames{tag: "creds", ifPrefix: "hsc", nsPrefix: "hutchcr-",
		subnet: "10.86.0.0/16", portBase: 36000, trustUpstream: true}, nil)
}

// putEgress sets a sandbox's egress policy (PUT /v1/sandboxes/{id}/egress).
func putEgress(t *testing.T, dm *daemontest.Daemon, id, spec string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, dm.URL()+"/v1/sandboxes/"+id+"/egress", strings.NewReader(spec))
	req.Header.Set("Authorization", "Bearer "+dm.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT egress: %d %s", resp.StatusCode, b)
	}
}

func execOK(t *testing.T, sb *client.Sandbox, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, cmd, nil)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", cmd, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// TestEgressCredentialsGitScenario is the scenario end to end: a real sandbox clones
// from a private git server over HTTPS with a rule that injects the token; git, curl, Python
// and Node inside trust the sandbox CA without -k; then no file of the sandbox, no process
// environment on the host, no snapshot file and no hutchd log line holds the token.
func TestEgressCredentialsGitScenario(t *testing.T) {
	requireEnv(t)
	const token = "ghs_RealGitTokenNeverInTheSandbox_7f3a9c"
	const apiKey = "sk-real-api-key-0123456789-abcdef"
	inet := egresstest.NewInternet(t, egresstest.InternetConfig{GitToken: token})
	dm := credsDaemon(t, inet)
	c := dm.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := c.SetSecret(ctx, "GIT_TOKEN", token); err != nil {
		t.Fatal(err)
	}
	if err := c.SetSecret(ctx, "OPENAI_API_KEY", apiKey); err != nil {
		t.Fatal(err)
	}
	sb, err := c.Sandbox(ctx, "creds", nil)
	if err != nil {
		t.Fatalf("sandbox: %v\n%s", err, dm.LogTail())
	}
	putEgress(t, dm, "creds", `{
	  "rules": [
	    {"id": "git", "hosts": ["git.example.test"], "action": "inject",
	     "inject": {"basicAuth": {"username": "x-access-token", "password": "${secrets.GIT_TOKEN}"}}},
	    {"id": "api", "hosts": ["api.example.test"], "action": "inject",
	     "inject": {"setHeaders": {"X-Git-Token": "${secrets.GIT_TOKEN}"}}},
	    {"id": "reflect", "hosts": ["reflect.example.test"], "action": "inject",
	     "inject": {"setHeaders": {"X-Git-Token": "${secrets.GIT_TOKEN}"}}}
	  ],
	  "placeholders": [{"secret": "OPENAI_API_KEY", "hosts": ["api.example.test", "reflect.example.test"], "prefix": "sk-"}]
	}`)
	inet.StartReflector(t, "reflect.example.test")
	caBefore, err := sb.EgressCA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Placeholders reach PID 1's environment at start: restart once (the CA stays).
	if _, err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx); err != nil {
		t.Fatalf("start: %v\n%s", err, dm.LogTail())
	}

	// The CA: the API's ca.pem equals the mounted file, the key is nowhere in the sandbox.
	caPEM, err := sb.EgressCA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(caBefore, caPEM) {
		t.Fatal("the CA changed across stop and start")
	}
	if got := execOK(t, sb, "cat /run/hutch/egress-ca.pem"); got != string(caPEM) {
		t.Fatalf("mounted CA differs from ca.pem")
	}
	if out := execOK(t, sb, "grep -c 'BEGIN CERTIFICATE' /usr/local/share/ca-certificates/hutch-egress-ca.crt; grep -rl 'PRIVATE KEY' /run/hutch /etc/ssl /usr/local/share/ca-certificates 2>/dev/null | wc -l"); out != "1\n0\n" {
		t.Fatalf("CA install: %q", out)
	}

	t.Run("git clones through the injected token", func(t *testing.T) {
		execOK(t, sb, "git clone -q https://git.example.test"+inet.RepoPath+" /workspace/repo")
		if out := execOK(t, sb, "cat /workspace/repo/README"); !strings.Contains(out, "hello from hxnet") {
			t.Fatalf("README: %q", out)
		}
		execOK(t, sb, "cd /workspace/repo && git pull -q && git ls-remote origin >/dev/null")
	})
	t.Run("curl, python (urllib, requests, httpx, pip), node and Go trust the sandbox CA", func(t *testing.T) {
		out := execOK(t, sb, "curl -sS https://api.example.test/headers")
		if strings.Contains(out, token) || !strings.Contains(out, "[redacted:GIT_TOKEN]") {
			t.Fatalf("curl echo: %s", out)
		}
		reqs := inet.APIRequests()
		if got := reqs[len(reqs)-1].Header.Get("X-Git-Token"); got != token {
			t.Fatalf("upstream saw X-Git-Token %q", got)
		}
		out = execOK(t, sb, `python3 -c "import urllib.request,ssl; r=urllib.request.urlopen('https://api.example.test/headers'); print(r.status)"`)
		if strings.TrimSpace(out) != "200" {
			t.Fatalf("python: %q", out)
		}
		out = execOK(t, sb, `node -e "fetch('https://api.example.test/headers').then(r=>console.log(r.status)).catch(e=>{console.error(e);process.exit(1)})"`)
		if strings.TrimSpace(out) != "200" {
			t.Fatalf("node: %q", out)
		}
		// requests and httpx (certifi's bundle unless REQUESTS_CA_BUNDLE/SSL_CERT_FILE say
		// otherwise) and pip (PIP_CERT), from the fake internet's PEP 503 index.
		out = execOK(t, sb, `python3 -c "import requests; print(requests.get('https://api.example.test/headers').status_code)"`)
		if strings.TrimSpace(out) != "200" {
			t.Fatalf("python requests: %q", out)
		}
		out = execOK(t, sb, `python3 -c "import httpx; print(httpx.get('https://api.example.test/headers').status_code)"`)
		if strings.TrimSpace(out) != "200" {
			t.Fatalf("python httpx: %q", out)
		}
		out = execOK(t, sb, "cd /tmp && python3 -m pip download --no-deps --disable-pip-version-check --index-url https://api.example.test/simple/ "+egresstest.PyPIPackage+" >/dev/null && ls /tmp/hutch_demo-1.0-py3-none-any.whl")
		if !strings.Contains(out, "hutch_demo-1.0-py3-none-any.whl") {
			t.Fatalf("pip download: %q", out)
		}
		// A static Go binary (Go's own TLS stack reads SSL_CERT_FILE or the system bundle).
		bin := buildHTTPSGet(t)
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.WriteFile(ctxT(t, time.Minute), "/tmp/httpsget", b); err != nil {
			t.Fatal(err)
		}
		out = execOK(t, sb, "chmod +x /tmp/httpsget && /tmp/httpsget https://api.example.test/headers")
		if strings.TrimSpace(out) != "200" {
			t.Fatalf("go binary: %q", out)
		}
	})
	t.Run("the placeholder stands in for the key and is swapped only towards its host", func(t *testing.T) {
		ph := strings.TrimSpace(execOK(t, sb, "printenv OPENAI_API_KEY"))
		if !strings.HasPrefix(ph, "sk-hutchph_") || strings.Contains(ph, apiKey) {
			t.Fatalf("placeholder env %q", ph)
		}
		out := execOK(t, sb, `curl -sS -H "Authorization: Bearer $OPENAI_API_KEY" https://api.example.test/headers`)
		reqs := inet.APIRequests()
		if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer "+apiKey {
			t.Fatalf("upstream Authorization %q", got)
		}
		if strings.Contains(out, apiKey) || !strings.Contains(out, ph) {
			t.Fatalf("echo not redacted to the placeholder: %s", out)
		}
	})
	t.Run("an upstream's 103 Early Hints reflecting the credentials is redacted", func(t *testing.T) {
		// The 103 block is written before the final response exists; a field named after the
		// token arrives lower-cased over HTTP/2.
		for _, proto := range []string{"--http1.1", "--http2"} {
			for _, c := range []struct{ query, secret, want string }{
				{"h=X-Git-Token&name=1", token, "[redacted:GIT_TOKEN]"},
				{"h=Authorization&from=7&name=1", apiKey, "sk-hutchph_"},
			} {
				out := execOK(t, sb, `curl -sS -D - -H "Authorization: Bearer $OPENAI_API_KEY" `+proto+` 'https://reflect.example.test/reflect?info=103&pre=k%3D&`+c.query+`'`)
				lo := strings.ToLower(out)
				// Any run of a third of the secret, in any case.
				for a, n := 0, len(c.secret)/3; a+n <= len(c.secret); a++ {
					if strings.Contains(lo, strings.ToLower(c.secret[a:a+n])) {
						t.Fatalf("%s %s: the sandbox saw the secret: %q", proto, c.query, out)
					}
				}
				first, _, _ := strings.Cut(lo, "\r\n\r\n")
				if !strings.Contains(first, " 103") || !strings.Contains(first, "x-reflected: k="+strings.ToLower(c.want)) {
					t.Fatalf("%s %s: want a redacted 103 first: %q", proto, c.query, out)
				}
			}
		}
	})

	// A fork (snapshot + new sandbox) inherits the CA: its disk already trusts it.
	fr, err := sb.Fork(ctx, 1, &client.ForkOptions{IDs: []string{"creds-fork"}})
	if err != nil {
		t.Fatalf("fork: %v\n%s", err, dm.LogTail())
	}
	fork := c.SandboxHandle(fr.Sandboxes[0].ID)
	if forkCA, err := fork.EgressCA(ctx); err != nil || !bytes.Equal(forkCA, caPEM) {
		t.Fatalf("fork CA differs from its parent's (%v)", err)
	}
	if out := execOK(t, fork, "curl -sS -o /dev/null -w '%{http_code}' https://api.example.test/headers"); out != "200" {
		t.Fatalf("fork curl: %q", out)
	}
	// A snapshot of the sandbox, then the search.
	if _, err := sb.Snapshot(ctx); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// Every process's environment on this host (the sandbox's processes included).
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(apiKey))) {
			t.Errorf("%s holds a secret", p)
		}
	}
	// The sandbox's files as the sandbox sees them (every file it changed is in its upper
	// dir; etc holds the files hutchd mounts), hutchd's state (database, WAL, snapshots,
	// audit) and its log.
	searched := 0
	filepath.WalkDir(dm.StateDir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if de.IsDir() {
			if strings.HasSuffix(p, "/rootfs") || p == filepath.Join(dm.StateDir, "runc") {
				return filepath.SkipDir // the merged view repeats upper + image
			}
			return nil
		}
		if !de.Type().IsRegular() {
			return nil
		}
		found, err := fileHolds(p, []byte(token), []byte(apiKey))
		if err != nil {
			return nil
		}
		searched++
		if found {
			t.Errorf("%s holds a secret", p)
		}
		return nil
	})
	if searched < 10 {
		t.Fatalf("searched only %d files under %s", searched, dm.StateDir)
	}
	if out := execOK(t, sb, "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c hutchph_ || true"); strings.TrimSpace(out) == "0" {
		t.Fatalf("no process in the sandbox carries the placeholder env")
	}
}

// fileHolds reports whether the file at path contains any of needles (none empty, none with a
// zero byte). It reads the file's data extents alone, in chunks: a sandbox's disk image is a
// sparse file of gigabytes, and its holes are zeros, which hold no needle.
func fileHolds(path string, needles ...[]byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	extents, _, err := sparse.Extents(f, fi.Size())
	if err != nil {
		return false, err
	}
	longest := 0
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	buf := make([]byte, 4<<20)
	for _, e := range extents {
		// Each chunk starts with the previous one's last longest-1 bytes, so a needle across
		// two chunks is found; one across two extents is not possible, as a hole separates them.
		keep := 0
		for off := e.Off; off < e.Off+e.Len; {
			n, err := f.ReadAt(buf[keep:min(len(buf), keep+int(e.Off+e.Len-off))], off)
			if n == 0 && err != nil {
				return false, err
			}
			chunk := buf[:keep+n]
			for _, nd := range needles {
				if bytes.Contains(chunk, nd) {
					return true, nil
				}
			}
			off += int64(n)
			keep = min(longest-1, len(chunk))
			copy(buf, chunk[len(chunk)-keep:])
		}
	}
	return false, nil
}

// httpsGetSource is a static Go program that GETs its argument and prints the status code.
const httpsGetSource = `package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
}
`

// buildHTTPSGet builds httpsGetSource as a static binary and returns its path.
func buildHTTPSGet(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(httpsGetSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module httpsget\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", "httpsget", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the Go HTTPS client: %v\n%s", err, out)
	}
	return filepath.Join(dir, "httpsget")
}
