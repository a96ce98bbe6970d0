package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLoadRootCAs: no files are the system roots (nil); a PEM file's certificates are trusted;
// a missing file or one with no PEM certificate is an error naming it.
func TestLoadRootCAs(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "private CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "none.pem")
	for _, c := range []struct {
		name    string
		files   []string
		nilPool bool
		wantErr string
	}{
		{name: "none", nilPool: true},
		{name: "a CA", files: []string{caFile}},
		{name: "missing", files: []string{caFile, missing}, wantErr: "egress root CA: open " + missing},
		{name: "no PEM", files: []string{junk}, wantErr: "egress root CA " + junk + ": no PEM certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool, err := LoadRootCAs(c.files)
			switch {
			case c.wantErr != "":
				if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) {
					t.Fatalf("LoadRootCAs = %v; want %q…", err, c.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case c.nilPool:
				if pool != nil {
					t.Error("pool is not nil")
				}
			default:
				if _, err := ca.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
					t.Errorf("the file's CA is not trusted: %v", err)
				}
			}
		})
	}
}
