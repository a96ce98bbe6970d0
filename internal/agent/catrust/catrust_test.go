package catrust

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/egress/mitm"
)

func writeCA(t *testing.T, root string) []byte {
	t.Helper()
	ca, err := mitm.NewCA("t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, CAPath)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, ca.CertPEM, 0o444); err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM
}

func noEnv(string) string { return "" }

func TestInstallIdempotentAndEnvDefaults(t *testing.T) {
	root := t.TempDir()
	// A Red Hat-style image: only the second bundle exists.
	rh := filepath.Join(root, Bundles[1])
	os.MkdirAll(filepath.Dir(rh), 0o755)
	os.WriteFile(rh, []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----"), 0o644)
	pemCA := writeCA(t, root)

	res := Install(root, noEnv)
	if len(res.Errs) != 0 || !res.Appended || res.Bundle != Bundles[1] || len(res.Fingerprint) != 64 {
		t.Fatalf("first install: %+v", res)
	}
	b, _ := os.ReadFile(rh)
	if !bytes.Contains(b, pemCA) || !bytes.HasPrefix(b, []byte("-----BEGIN")) {
		t.Fatalf("bundle after install:\n%s", b)
	}
	if local, _ := os.ReadFile(filepath.Join(root, LocalCopy)); !bytes.Equal(local, pemCA) {
		t.Fatal("local copy missing or different")
	}
	if _, err := os.Stat(filepath.Join(root, Bundles[0])); err == nil {
		t.Fatal("made a Debian bundle although one existed")
	}
	env := strings.Join(res.Env, "\n")
	for _, want := range []string{"NODE_EXTRA_CA_CERTS=" + CAPath, "SSL_CERT_FILE=" + Bundles[1], "GIT_SSL_CAINFO=" + Bundles[1], "DENO_CERT=" + Bundles[1], "PIP_CERT=" + Bundles[1]} {
		if !strings.Contains(env, want+"\n") && !strings.HasSuffix(env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	// Second run (a wake): nothing appended twice.
	res2 := Install(root, noEnv)
	if res2.Appended || len(res2.Errs) != 0 || res2.Fingerprint != res.Fingerprint {
		t.Fatalf("second install: %+v", res2)
	}
	b2, _ := os.ReadFile(rh)
	if !bytes.Equal(b, b2) {
		t.Fatal("second install changed the bundle")
	}
	// Variables already set are kept.
	res3 := Install(root, func(k string) string {
		if k == "SSL_CERT_FILE" {
			return "/mine.pem"
		}
		return ""
	})
	if strings.Contains(strings.Join(res3.Env, " "), "SSL_CERT_FILE=") {
		t.Fatalf("overrode a set variable: %v", res3.Env)
	}
}

func TestInstallCreatesDebianBundleAndToleratesReadOnly(t *testing.T) {
	root := t.TempDir()
	writeCA(t, root)
	res := Install(root, noEnv)
	if !res.Appended || res.Bundle != Bundles[0] {
		t.Fatalf("no bundle case: %+v", res)
	}
	// A bundle that already holds the CA (hutchd's mount) and cannot be written: no error.
	root2 := t.TempDir()
	writeCA(t, root2)
	deb := filepath.Join(root2, Bundles[0])
	os.MkdirAll(filepath.Dir(deb), 0o755)
	ca, _ := os.ReadFile(filepath.Join(root2, CAPath))
	os.WriteFile(deb, append([]byte("other\n"), ca...), 0o444)
	if res := Install(root2, noEnv); res.Appended || len(res.Errs) != 0 {
		t.Fatalf("bundle with CA: %+v", res)
	}
	// No CA mounted: nothing happens.
	if res := Install(t.TempDir(), noEnv); res.Fingerprint != "" || len(res.Env) != 0 {
		t.Fatalf("no CA: %+v", res)
	}
	// Garbage in the CA file: an error, no env.
	root3 := t.TempDir()
	p := filepath.Join(root3, CAPath)
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("garbage"), 0o444)
	if res := Install(root3, noEnv); len(res.Errs) == 0 || len(res.Env) != 0 {
		t.Fatalf("garbage CA: %+v", res)
	}
}
