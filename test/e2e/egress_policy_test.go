package e2e

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/daemontest"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/testutil"
)

// policyDaemon starts the egress policy tests' own hutchd (egress_harness_test.go).
func policyDaemon(t *testing.T, inet *egresstest.Internet) *daemontest.Daemon {
	return egressDaemon(t, inet, egressDaemonNames{tag: "policy", ifPrefix: "hsp", nsPrefix: "hutchpol-",
		subnet: "10.85.0.0/16", portBase: 37000}, nil)
}

// rawCall sends method path body with the token (auth=true) and returns status and envelope.
func rawCall(t *testing.T, dm *daemontest.Daemon, method, path, body string, auth bool) (int, errdefs.Envelope, string) {
	t.Helper()
	req, _ := http.NewRequest(method, dm.URL()+path, strings.NewReader(body))
	if auth {
		req.Header.Set("Authorization", "Bearer "+dm.Token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env errdefs.Envelope
	json.Unmarshal(b, &env)
	return resp.StatusCode, env, string(b)
}

func policyExec(t *testing.T, sb *client.Sandbox, cmd string) *client.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, cmd, nil)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return res
}

// TestEgressPolicyAPI: the egress policy API refuses bad input with stable codes, a policy
// given at create time is in force for the first command, a live tightening cuts a running
// download in a real sandbox, policies survive a hutchd restart, are inherited by forks, and
// go away with the sandbox.
func TestEgressPolicyAPI(t *testing.T) {
	requireEnv(t)
	inet := egresstest.NewInternet(t, egresstest.InternetConfig{})
	dm := policyDaemon(t, inet)
	c := dm.Client()
	ctx := ctxT(t, 10*time.Minute)

	// Abuse: bad input, limits, auth.
	abuse := []struct {
		method, path, body string
		auth               bool
		status             int
		code               errdefs.Code
		pointer            string
	}{
		{"POST", "/v1/sandboxes", `{"id":"pol-bad","egress":{"mode":"open"}}`, true, 400, errdefs.CodeEgressPolicyInvalid, "/mode"},
		{"POST", "/v1/sandboxes", `{"id":"pol-bad","egress":{"allow":["*evil.test"]}}`, true, 400, errdefs.CodeEgressPolicyInvalid, "/allow/0"},
		{"POST", "/v1/sandboxes", `{"id":"pol-bad","egress":{"rules":[{"id":"r","hosts":["a.test"],"action":"inject","inject":{"setHeaders":{"x":"${secrets.NOPE}"}}}]}}`, true, 400, errdefs.CodeEgressPolicyInvalid, "/rules/0/inject/setHeaders/x"},
		{"PUT", "/v1/sandboxes/pol-missing/egress", `{"mode":"deny-all"}`, true, 404, errdefs.CodeSandboxNotFound, ""},
		{"GET", "/v1/sandboxes/pol-missing/egress", ``, true, 404, errdefs.CodeSandboxNotFound, ""},
		{"GET", "/v1/sandboxes/BAD..ID/egress", ``, true, 400, errdefs.CodeInvalidSandboxID, ""},
		{"GET", "/v1/sandboxes/pol-a/egress", ``, false, 401, errdefs.CodeUnauthenticated, ""},
		{"PUT", "/v1/sandboxes/pol-a/egress", `{"mode":"deny-all"}`, false, 401, errdefs.CodeUnauthenticated, ""},
		{"DELETE", "/v1/sandboxes/pol-a/egress", ``, true, 405, errdefs.CodeMethodNotAllowed, ""},
	}
	for _, a := range abuse {
		status, env, body := rawCall(t, dm, a.method, a.path, a.body, a.auth)
		if status != a.status || env.Code != a.code || (a.pointer != "" && env.Context["pointer"] != a.pointer) {
			t.Errorf("%s %s %s: %d %s; want %d %s pointer %q", a.method, a.path, a.body, status, body, a.status, a.code, a.pointer)
		}
	}
	if _, err := c.GetSandbox(ctx, "pol-bad"); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Errorf("a create with an invalid policy left a sandbox: %v", err)
	}

	// Created with a policy: in force for the first command.
	sb, err := c.Sandbox(ctx, "pol-a", &client.SandboxOptions{Egress: &client.EgressPolicy{Mode: "allowlist", Allow: []string{"api.example.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := policyExec(t, sb, "curl -sS --max-time 20 http://api.example.test/headers"); res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "api.example.test") {
		t.Fatalf("allowed host: %d %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := policyExec(t, sb, "curl -sS --max-time 20 http://git.example.test/"); res.ExitCode == 0 {
		t.Errorf("host off the allowlist reached: %s", res.Stdout)
	}
	if inet.Asked("git.example.test") {
		t.Error("a denied name was resolved upstream")
	}
	for _, a := range []struct{ method, body string }{
		{"PUT", `{`}, {"PUT", `{"allowed":[]}`}, {"PUT", `{"ports":"any"}`}, {"PATCH", `{"rules":[{"id":"x"}]}`}, {"PATCH", `[1`},
		{"PUT", `{"allow":["` + strings.Repeat("a", 2<<20) + `"]}`},
	} {
		status, env, body := rawCall(t, dm, a.method, "/v1/sandboxes/pol-a/egress", a.body, true)
		if status < 400 || status >= 500 || (env.Code != errdefs.CodeInvalidJSON && env.Code != errdefs.CodeEgressPolicyInvalid && env.Code != errdefs.CodeRequestTooLarge) {
			t.Errorf("%s %.60s: %d %.200s", a.method, a.body, status, body)
		}
	}
	if status, env, _ := rawCall(t, dm, "GET", "/v1/sandboxes/pol-a/egress/events?since=abc", "", true); status != 400 || env.Code != errdefs.CodeInvalidArgument {
		t.Errorf("events since=abc: %d %s", status, env.Code)
	}
	// A refused update leaves the policy alone.
	if p, err := sb.Egress(ctx); err != nil || p.Mode != "allowlist" || len(p.Allow) != 1 {
		t.Errorf("policy after refused updates: %+v %v", p, err)
	}

	// Live tightening cuts a running download.
	type result struct {
		res *client.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := sb.Exec(dctx, "curl -sS -o /dev/null http://api.example.test/stream?ms=50", nil)
		done <- result{res, err}
	}()
	if !testutil.Poll(t, 50*time.Millisecond, time.Minute, func() bool { return inet.OpenStreams() >= 1 }) {
		t.Fatal("download did not start")
	}
	p, err := sb.PatchEgress(ctx, map[string]any{"allow": []string{"git.example.test"}})
	if err != nil || len(p.Allow) != 1 || p.Allow[0] != "git.example.test" || p.Mode != "allowlist" {
		t.Fatalf("PatchEgress = %+v %v", p, err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.res.ExitCode == 0 {
			t.Errorf("download after the tightening: %+v %v; want curl to fail", r.res, r.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("download still running 60 s after the tightening")
	}
	if res := policyExec(t, sb, "curl -sS --max-time 20 --resolve api.example.test:80:198.51.100.10 http://api.example.test/headers"); !strings.Contains(string(res.Stdout), "EGRESS_DENIED") {
		t.Errorf("new request after the tightening: %d %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	// The audit stream has the change and the cut connection.
	var sawUpdate, sawClosed bool
	evctx, evcancel := context.WithTimeout(ctx, 30*time.Second)
	for ev, err := range sb.EgressEvents(evctx, 0, false) {
		if err != nil {
			t.Errorf("events: %v", err)
			break
		}
		sawUpdate = sawUpdate || ev.Kind == "policy.updated"
		sawClosed = sawClosed || (ev.Kind == "conn" && ev.Decision == "closed" && ev.Host == "api.example.test")
	}
	evcancel()
	if !sawUpdate || !sawClosed {
		t.Errorf("events: policy.updated %v, closed conn %v", sawUpdate, sawClosed)
	}

	// The CLI: show, set from stdin, patch, events.
	hutch := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(bins, "hutch"), append([]string{"--url", dm.URL(), "--token", dm.Token}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := hutch("", "egress", "pol-a"); err != nil || !strings.Contains(out, `"git.example.test"`) {
		t.Errorf("hutch egress: %v\n%s", err, out)
	}
	if out, err := hutch(`{"mode":"allowlist","allow":["git.example.test","x.example.test"]}`, "egress", "pol-a", "--set", "-"); err != nil || !strings.Contains(out, `"x.example.test"`) {
		t.Errorf("hutch egress --set -: %v\n%s", err, out)
	}
	if out, err := hutch(`{"allow":["git.example.test"]}`, "egress", "pol-a", "--patch", "-"); err != nil || strings.Contains(out, `"x.example.test"`) {
		t.Errorf("hutch egress --patch -: %v\n%s", err, out)
	}
	if out, err := hutch(`{"allow":["*bad"]}`, "egress", "pol-a", "--set", "-"); err == nil || !strings.Contains(out, "EGRESS_POLICY_INVALID") {
		t.Errorf("hutch egress --set with a bad policy: %v\n%s", err, out)
	}
	if out, err := hutch("", "egress", "pol-a", "--events"); err != nil || !strings.Contains(out, `"kind":"policy.updated"`) {
		t.Errorf("hutch egress --events: %v\n%.500s", err, out)
	}

	// Forks inherit the policy.
	_, err = sb.Fork(ctx, 1, &client.ForkOptions{IDs: []string{"pol-fork"}})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	fork := c.SandboxHandle("pol-fork")
	if fp, err := fork.Egress(ctx); err != nil || fp.Mode != "allowlist" || len(fp.Allow) != 1 || fp.Allow[0] != "git.example.test" {
		t.Errorf("fork's policy = %+v %v", fp, err)
	}
	if res := policyExec(t, fork, "curl -sS --max-time 20 --resolve api.example.test:80:198.51.100.10 http://api.example.test/headers"); !strings.Contains(string(res.Stdout), "EGRESS_DENIED") {
		t.Errorf("fork reached a host its policy denies: %d %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}

	// Across a restart of hutchd.
	dm.Stop()
	if err := dm.Start(context.Background()); err != nil {
		t.Fatalf("restart: %v\n%s", err, dm.LogTail())
	}
	c = dm.Client()
	sb = c.SandboxHandle("pol-a")
	if p, err := sb.Egress(ctx); err != nil || len(p.Allow) != 1 || p.Allow[0] != "git.example.test" {
		t.Errorf("policy after restart = %+v %v", p, err)
	}
	if res := policyExec(t, sb, "curl -sS --max-time 20 --resolve api.example.test:80:198.51.100.10 http://api.example.test/headers"); !strings.Contains(string(res.Stdout), "EGRESS_DENIED") {
		t.Errorf("after restart a denied host answered: %d %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}

	// Deleted with the sandbox: a new sandbox of the same name starts allow-all.
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Egress(ctx); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Errorf("policy of a destroyed sandbox: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dm.StateDir, "sandboxes", "pol-a", "egress.jsonl")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("audit log outlived its sandbox: %v", err)
	}
	sb2, err := c.Sandbox(ctx, "pol-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := sb2.Egress(ctx); err != nil || p.Mode != "allow-all" {
		t.Errorf("new sandbox of the same name: %+v %v", p, err)
	}
	if res := policyExec(t, sb2, "curl -sS --max-time 20 http://api.example.test/headers"); res.ExitCode != 0 {
		t.Errorf("new allow-all sandbox: %d %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if hits := inet.SinkHits(); len(hits) != 0 {
		t.Errorf("the evil sink got %d hits", len(hits))
	}
}
