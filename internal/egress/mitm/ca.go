// Package mitm holds hutchd's per-sandbox egress certificate authorities (EGRESS.md §6): one
// ECDSA P-256 CA per sandbox, made the first time the sandbox needs it, stored in the metadata
// store with its key sealed by the host master key (internal/secret), kept across sleep and
// wake, copied to forks and to sandboxes started from a snapshot of it, deleted with the
// sandbox. Only its certificate ever enters the sandbox (/run/hutch/egress-ca.pem).
//
// Leaf certificates are minted on demand for the exact host name the proxy intercepts (no
// wildcards, so clients never coalesce other names onto an intercepted connection), cached in
// a bounded LRU keyed by (CA, name), with one mint per key under concurrency.
package mitm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Validity periods (EGRESS.md §6.1, §6.2). Certificates start an hour in the past so a
// client with a slightly slow clock accepts them.
const (
	Backdate     = time.Hour
	CAValidity   = 5 * 365 * 24 * time.Hour
	LeafValidity = 7 * 24 * time.Hour
	// LeafRenewBefore: a cached leaf with less than this left is minted again.
	LeafRenewBefore = 24 * time.Hour
)

// CA is one sandbox's certificate authority.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	// ID is the first 8 bytes of the SHA-256 of the certificate, hex: the cache key and the
	// fingerprint hutch-init compares.
	ID string
}

// NewCA makes a fresh CA for sandboxID: CN "Hutch egress CA <sandboxID>/<8 hex>", O Hutch,
// CA:TRUE pathlen 0, KeyUsage certSign|cRLSign, 128-bit random serial, valid from now−1h for
// 5 years.
func NewCA(sandboxID string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: ca key: %w", err)
	}
	serial, err := randSerial()
	if err != nil {
		return nil, err
	}
	tag := make([]byte, 4)
	rand.Read(tag)
	skid, err := keyID(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	name := sandboxID
	if len(name) > 40 {
		name = name[:40]
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("Hutch egress CA %s/%s", name, hex.EncodeToString(tag)), Organization: []string{"Hutch"}},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		SubjectKeyId:          skid,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("mitm: ca certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("mitm: ca key: %w", err)
	}
	return ParseCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyDER)
}

// ParseCA rebuilds a CA from its PEM certificate and its DER (SEC 1) private key, checking
// that they belong together.
func ParseCA(certPEM, keyDER []byte) (*CA, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("mitm: ca certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("mitm: ca certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("mitm: ca key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("mitm: ca key does not match its certificate")
	}
	sum := sha256.Sum256(cert.Raw)
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), ID: hex.EncodeToString(sum[:8])}, nil
}

// KeyDER returns the CA key in SEC 1 DER form (to be sealed before storing).
func (ca *CA) KeyDER() ([]byte, error) { return x509.MarshalECPrivateKey(ca.Key) }

// MintLeaf makes a leaf for host (a canonical DNS name): ECDSA P-256, SAN and CN = host, EKU
// serverAuth, KU digitalSignature, valid from now−1h for 7 days, signed by ca. The returned
// certificate's chain holds the leaf and the CA.
func (ca *CA) MintLeaf(host string, now time.Time) (*tls.Certificate, error) {
	if host == "" {
		return nil, errors.New("mitm: leaf needs a host name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: leaf key: %w", err)
	}
	serial, err := randSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(LeafValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		AuthorityKeyId:        ca.Cert.SubjectKeyId,
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("mitm: leaf certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: leaf certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

func randSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("mitm: serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func keyID(pub *ecdsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("mitm: key id: %w", err)
	}
	sum := sha256.Sum256(der)
	return sum[:20], nil
}
