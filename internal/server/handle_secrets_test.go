package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/mitm"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/store"
)

// usedSecrets is the secret store plus a fixed "used by" table (the policy side).
type usedSecrets struct {
	*secret.Store
	used map[string][]string
}

func (u usedSecrets) UsedBy(context.Context) (map[string][]string, error) { return u.used, nil }

// caSource serves CAs from a real mitm.Authority over the store.
type caSource struct{ a *mitm.Authority }

func (c caSource) CACertPEM(ctx context.Context, id string) ([]byte, error) {
	ca, err := c.a.Ensure(ctx, id, "")
	if err != nil {
		return nil, err
	}
	return ca.CertPEM, nil
}

func secretsServer(t *testing.T) (*httptest.Server, *client.Client, *bytes.Buffer, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Insert(ctx, store.Sandbox{ID: "sb1", Status: "stopped"}); err != nil {
		t.Fatal(err)
	}
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "keys", "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(New(log, Deps{Token: testToken, Version: "test",
		Secrets:  usedSecrets{Store: secret.NewStore(st, box), used: map[string][]string{"IN_USE": {"sb1"}}},
		EgressCA: caSource{mitm.NewAuthority(st, box, 0, nil)}}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, testToken)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, &logBuf, dir
}

func rawCall(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const secretValue = "ghp_ValueThatMustNeverBeLogged_42"

func TestSecretsAPI(t *testing.T) {
	srv, c, logBuf, dir := secretsServer(t)
	ctx := context.Background()
	if err := c.SetSecret(ctx, "GITHUB_TOKEN", secretValue); err != nil {
		t.Fatal(err)
	}
	if err := c.SetSecret(ctx, "IN_USE", "another-value-123"); err != nil {
		t.Fatal(err)
	}
	list, err := c.Secrets(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "GITHUB_TOKEN" || list[1].Name != "IN_USE" ||
		len(list[1].UsedBy) != 1 || list[1].UsedBy[0] != "sb1" || list[0].UsedBy == nil || list[0].UpdatedAt.IsZero() {
		t.Fatalf("list = %+v, %v", list, err)
	}
	status, body := rawCall(t, srv, "GET", "/v1/secrets", testToken, "")
	if status != 200 || strings.Contains(body, secretValue) || strings.Contains(body, "value") {
		t.Fatalf("list reply carries values: %d %s", status, body)
	}
	// In use: refused with the users named.
	err = c.DeleteSecret(ctx, "IN_USE")
	if !errdefs.IsCode(err, errdefs.CodeSecretInUse) || !strings.Contains(err.Error(), "sandbox") {
		t.Fatalf("delete in use: %v", err)
	}
	if err := c.DeleteSecret(ctx, "GITHUB_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSecret(ctx, "GITHUB_TOKEN"); !errdefs.IsCode(err, errdefs.CodeSecretNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// Rotation over an existing name works and reports nothing of the value.
	if err := c.SetSecret(ctx, "IN_USE", "rotated-value-456"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logBuf.String(), secretValue) || strings.Contains(logBuf.String(), "rotated-value-456") {
		t.Fatalf("log holds a secret value:\n%s", logBuf.String())
	}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("rotated-value-456")) {
				t.Errorf("%s holds a secret value in clear", p)
			}
		}
		return nil
	})
}

func TestSecretsAPIAbuse(t *testing.T) {
	srv, _, logBuf, _ := secretsServer(t)
	long := strings.Repeat("x", secret.MaxValueLen+1)
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		code                            errdefs.Code
	}{
		{"no token", "PUT", "/v1/secrets/A", "", `{"value":"` + secretValue + `"}`, 401, errdefs.CodeUnauthenticated},
		{"wrong token", "GET", "/v1/secrets", "nope", "", 401, errdefs.CodeUnauthenticated},
		{"wrong token delete", "DELETE", "/v1/secrets/A", "nope", "", 401, errdefs.CodeUnauthenticated},
		{"bad name", "PUT", "/v1/secrets/1bad", testToken, `{"value":"` + secretValue + `"}`, 400, errdefs.CodeInvalidSecret},
		{"dotted name", "PUT", "/v1/secrets/a.b", testToken, `{"value":"` + secretValue + `"}`, 400, errdefs.CodeInvalidSecret},
		{"template name", "PUT", "/v1/secrets/%24%7Bx%7D", testToken, `{"value":"` + secretValue + `"}`, 400, errdefs.CodeInvalidSecret},
		{"no value", "PUT", "/v1/secrets/A", testToken, `{}`, 400, errdefs.CodeInvalidSecret},
		{"null value", "PUT", "/v1/secrets/A", testToken, `{"value":null}`, 400, errdefs.CodeInvalidSecret},
		{"number value", "PUT", "/v1/secrets/A", testToken, `{"value":12345678}`, 400, errdefs.CodeInvalidJSON},
		{"short value", "PUT", "/v1/secrets/A", testToken, `{"value":"short"}`, 400, errdefs.CodeInvalidSecret},
		{"header injection", "PUT", "/v1/secrets/A", testToken, `{"value":"abcdefgh\r\nX-Evil: 1"}`, 400, errdefs.CodeInvalidSecret},
		{"too long", "PUT", "/v1/secrets/A", testToken, `{"value":"` + long + `"}`, 400, errdefs.CodeInvalidSecret},
		{"not json", "PUT", "/v1/secrets/A", testToken, `value=` + secretValue, 400, errdefs.CodeInvalidJSON},
		{"post not allowed", "POST", "/v1/secrets", testToken, `{}`, 405, errdefs.CodeMethodNotAllowed},
		{"get one not allowed", "GET", "/v1/secrets/A", testToken, "", 405, errdefs.CodeMethodNotAllowed},
		{"delete unknown", "DELETE", "/v1/secrets/NOPE", testToken, "", 404, errdefs.CodeSecretNotFound},
		{"ca of unknown sandbox", "GET", "/v1/sandboxes/ghost/egress/ca.pem", testToken, "", 404, errdefs.CodeSandboxNotFound},
		{"ca bad id", "GET", "/v1/sandboxes/BAD_ID!/egress/ca.pem", testToken, "", 400, errdefs.CodeInvalidSandboxID},
		{"ca no token", "GET", "/v1/sandboxes/sb1/egress/ca.pem", "", "", 401, errdefs.CodeUnauthenticated},
		{"ca put not allowed", "PUT", "/v1/sandboxes/sb1/egress/ca.pem", testToken, "", 405, errdefs.CodeMethodNotAllowed},
	} {
		status, body := rawCall(t, srv, tc.method, tc.path, tc.token, tc.body)
		if status != tc.status || !strings.Contains(body, string(tc.code)) {
			t.Errorf("%s: %d %s; want %d %s", tc.name, status, body, tc.status, tc.code)
		}
		if strings.Contains(body, secretValue) || strings.Contains(body, "abcdefgh") {
			t.Errorf("%s: reply echoes the value: %s", tc.name, body)
		}
	}
	if status, body := rawCall(t, srv, "GET", "/v1/secrets", testToken, ""); status != 200 || !strings.Contains(body, `"secrets":[]`) {
		t.Fatalf("rejected secrets stored: %s", body)
	}
	if strings.Contains(logBuf.String(), secretValue) {
		t.Fatalf("log holds a value:\n%s", logBuf.String())
	}
}

func TestEgressCAEndpoint(t *testing.T) {
	srv, c, _, _ := secretsServer(t)
	ctx := context.Background()
	pem1, err := c.SandboxHandle("sb1").EgressCA(ctx)
	if err != nil || !bytes.HasPrefix(pem1, []byte("-----BEGIN CERTIFICATE-----")) || bytes.Contains(pem1, []byte("PRIVATE")) {
		t.Fatalf("ca.pem = %q, %v", pem1, err)
	}
	pem2, _ := c.SandboxHandle("sb1").EgressCA(ctx)
	if !bytes.Equal(pem1, pem2) {
		t.Fatal("CA changed between calls")
	}
	ca, err := mitm.ParseCA(pem1, nil)
	if err == nil || ca != nil {
		t.Fatal("a CA parsed without its key")
	}
	resp, err := srv.Client().Get(srv.URL + "/v1/sandboxes/sb1/egress/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("unauthenticated ca.pem: %d", resp.StatusCode)
	}
}
