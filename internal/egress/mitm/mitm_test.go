package mitm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/store"
)

func TestCAAndLeafShape(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("demo", now)
	if err != nil {
		t.Fatal(err)
	}
	c := ca.Cert
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Fatalf("CA constraints: isCA=%v pathlen=%d zero=%v", c.IsCA, c.MaxPathLen, c.MaxPathLenZero)
	}
	if c.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign || len(c.SubjectKeyId) == 0 {
		t.Fatalf("CA key usage %v skid %x", c.KeyUsage, c.SubjectKeyId)
	}
	if c.SerialNumber.BitLen() < 64 || !c.NotBefore.Before(now) || c.NotAfter.Before(now.Add(4*365*24*time.Hour)) {
		t.Fatalf("CA serial/validity: %v %v %v", c.SerialNumber, c.NotBefore, c.NotAfter)
	}
	leaf, err := ca.MintLeaf("api.example.test", now)
	if err != nil {
		t.Fatal(err)
	}
	l := leaf.Leaf
	if len(l.DNSNames) != 1 || l.DNSNames[0] != "api.example.test" || l.Subject.CommonName != "api.example.test" {
		t.Fatalf("leaf names: %v %q", l.DNSNames, l.Subject.CommonName)
	}
	if l.IsCA || len(l.ExtKeyUsage) != 1 || l.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth || l.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Fatalf("leaf usage: ca=%v eku=%v ku=%v", l.IsCA, l.ExtKeyUsage, l.KeyUsage)
	}
	if len(l.CRLDistributionPoints)+len(l.OCSPServer)+len(l.IssuingCertificateURL) != 0 {
		t.Fatal("leaf carries revocation or AIA URLs")
	}
	if !l.NotBefore.Before(now.Add(-30*time.Minute)) || l.NotAfter.After(now.Add(LeafValidity+time.Minute)) {
		t.Fatalf("leaf validity %v – %v", l.NotBefore, l.NotAfter)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"api.example.test", true}, {"evil.example.test", false}, {"x.api.example.test", false}} {
		_, err := l.Verify(x509.VerifyOptions{DNSName: tc.name, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if (err == nil) != tc.ok {
			t.Errorf("verify %s: %v (want ok=%v)", tc.name, err, tc.ok)
		}
	}
	// Another sandbox's CA does not verify it.
	other, _ := NewCA("other", now)
	op := x509.NewCertPool()
	op.AddCert(other.Cert)
	if _, err := l.Verify(x509.VerifyOptions{DNSName: "api.example.test", Roots: op}); err == nil {
		t.Fatal("leaf verifies under another sandbox's CA")
	}
	// A real TLS handshake with the leaf verifies against the CA alone.
	srvConn, cliConn := net.Pipe()
	defer srvConn.Close()
	defer cliConn.Close()
	go tls.Server(srvConn, &tls.Config{Certificates: []tls.Certificate{*leaf}}).Handshake()
	if err := tls.Client(cliConn, &tls.Config{ServerName: "api.example.test", RootCAs: pool}).Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
}

func TestParseCARejectsMismatchedKey(t *testing.T) {
	a, _ := NewCA("a", time.Now())
	b, _ := NewCA("b", time.Now())
	kb, _ := b.KeyDER()
	if _, err := ParseCA(a.CertPEM, kb); err == nil {
		t.Fatal("mismatched key accepted")
	}
	if _, err := ParseCA([]byte("junk"), kb); err == nil {
		t.Fatal("junk PEM accepted")
	}
}

func newAuthority(t *testing.T, ids ...string) (*Authority, *store.Store, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, id := range ids {
		if _, err := db.Insert(ctx, store.Sandbox{ID: id, Image: "img", ImageName: "default", InstanceType: "lite", Status: "creating"}); err != nil {
			t.Fatal(err)
		}
	}
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "keys", "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	return NewAuthority(db, box, 3, nil), db, dir
}

func TestAuthorityLifecycle(t *testing.T) {
	ctx := context.Background()
	a, db, dir := newAuthority(t, "parent", "fork", "fresh")
	if _, err := a.CertPEM(ctx, "parent"); !errdefs.IsCode(err, errdefs.CodeNotFound) {
		t.Fatalf("CertPEM before Ensure: %v", err)
	}
	p, err := a.Ensure(ctx, "parent", "")
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Ensure(ctx, "parent", "")
	if err != nil || again.ID != p.ID {
		t.Fatalf("second Ensure made another CA: %v", err)
	}
	// A new Authority (hutchd restart) loads the same CA from the store.
	a2 := NewAuthority(db, a.box, 0, nil)
	if got, err := a2.Get(ctx, "parent"); err != nil || got.ID != p.ID {
		t.Fatalf("reload: %v", err)
	}
	f, err := a.Ensure(ctx, "fork", "parent")
	if err != nil || f.ID != p.ID {
		t.Fatalf("fork did not inherit: %v", err)
	}
	fr, err := a.Ensure(ctx, "fresh", "no-such-parent")
	if err != nil || fr.ID == p.ID {
		t.Fatalf("fresh CA: %v", err)
	}
	if _, err := a.Ensure(ctx, "ghost", ""); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("Ensure for unknown sandbox: %v", err)
	}
	// The key is sealed at rest: no file under the state dir holds it in clear.
	keyDER, _ := p.KeyDER()
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, keyDER[7:39]) {
				t.Errorf("%s holds the CA private key", path)
			}
		}
		return nil
	})
	// Deleted with the sandbox.
	if err := db.Delete(ctx, "parent"); err != nil {
		t.Fatal(err)
	}
	a.Forget("parent")
	if _, err := a.CertPEM(ctx, "parent"); !errdefs.IsCode(err, errdefs.CodeNotFound) {
		t.Fatalf("CA survived its sandbox: %v", err)
	}
	if got, err := a.Get(ctx, "fork"); err != nil || got.ID != p.ID {
		t.Fatalf("fork lost its CA with the parent: %v", err)
	}
}

func TestLeafCacheBoundedAndSingleflight(t *testing.T) {
	ctx := context.Background()
	a, _, _ := newAuthority(t, "s")
	if _, err := a.Ensure(ctx, "s", ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]*tls.Certificate, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = a.Leaf(ctx, "s", "api.example.test")
		}()
	}
	wg.Wait()
	for _, c := range got[1:] {
		if c == nil || c != got[0] {
			t.Fatal("concurrent Leaf calls minted different leaves")
		}
	}
	for _, h := range []string{"a.test", "b.test", "c.test", "d.test", "e.test"} {
		if _, err := a.Leaf(ctx, "s", h); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.leaves.len(); n != 3 {
		t.Fatalf("leaf cache holds %d, want its bound 3", n)
	}
	// A leaf close to expiry is minted again.
	c1, _ := a.Leaf(ctx, "s", "e.test")
	a.now = func() time.Time { return time.Now().Add(LeafValidity - time.Hour) }
	c2, _ := a.Leaf(ctx, "s", "e.test")
	if c1 == c2 {
		t.Fatal("expiring leaf was not renewed")
	}
	if _, err := a.Leaf(ctx, "nope", "x.test"); err == nil {
		t.Fatal("leaf for a sandbox without CA")
	}
}

// TestSnapshotKeepsCA: a sandbox started from a snapshot gets the CA the snapshot was taken
// with even after the snapshot's sandbox is destroyed; without a recorded CA it gets a new one.
func TestSnapshotKeepsCA(t *testing.T) {
	ctx := context.Background()
	a, db, _ := newAuthority(t, "src", "later", "other")
	src, err := a.Ensure(ctx, "src", "")
	if err != nil {
		t.Fatal(err)
	}
	const snap = "sha256-" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
	if err := a.RememberSnapshot(ctx, snap, "src"); err != nil {
		t.Fatal(err)
	}
	if err := a.RememberSnapshot(ctx, "sha256-none", "no-such-sandbox"); err != nil {
		t.Fatalf("RememberSnapshot of a sandbox without a CA: %v", err)
	}
	if err := db.Delete(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	a.Forget("src")
	// A fresh Authority (hutchd restarted) so nothing is served from memory.
	a2 := NewAuthority(db, a.box, 0, nil)
	got, err := a2.EnsureFrom(ctx, "later", "src", snap)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != src.ID || !bytes.Equal(got.CertPEM, src.CertPEM) {
		t.Fatalf("sandbox from the snapshot got CA %s, want the snapshot's %s", got.ID, src.ID)
	}
	leaf, err := a2.Leaf(ctx, "later", "api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.test", Roots: poolOf(t, src.CertPEM)}); err != nil {
		t.Fatalf("leaf minted with the copied key does not chain to the snapshot's CA: %v", err)
	}
	other, err := a2.EnsureFrom(ctx, "other", "src", "sha256-unrecorded")
	if err != nil || other.ID == src.ID {
		t.Fatalf("unrecorded snapshot: CA %v, err %v; want a new CA", other, err)
	}
}

func poolOf(t *testing.T, pemBytes []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		t.Fatal("bad CA PEM")
	}
	return p
}
