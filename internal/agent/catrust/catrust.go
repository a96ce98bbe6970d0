// Package catrust installs the sandbox's egress CA certificate into the sandbox's trust stores
// (EGRESS.md §6.3). hutch-init runs it before serving, so before the first user process:
//
//  1. the PEM at /run/hutch/egress-ca.pem (mounted read-only by hutchd; only the certificate,
//     never the key) is appended to the first existing system bundle, unless a certificate
//     with the same fingerprint is already in it (hutchd's own bundle mount already carries
//     it; a read-only bundle is left alone);
//  2. it is copied to /usr/local/share/ca-certificates/hutch-egress-ca.crt, so a later
//     update-ca-certificates keeps it;
//  3. the usual CA variables get defaults (only where unset): NODE_EXTRA_CA_CERTS points at
//     the CA file (Node adds it to its roots), the others at the full bundle, because each of
//     them replaces its tool's default store.
//
// Everything is idempotent by fingerprint; failures are reported, not fatal (a sandbox with a
// read-only root still gets the environment defaults).
package catrust

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Paths (inside the sandbox).
const (
	CAPath    = "/run/hutch/egress-ca.pem"
	LocalCopy = "/usr/local/share/ca-certificates/hutch-egress-ca.crt"
)

// Bundles are the system bundle locations tried in order; when none exists the first is made.
var Bundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/ssl/cert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
}

// BundleVars are set to the bundle path when unset.
var BundleVars = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO", "DENO_CERT"}

// Result says what Install did.
type Result struct {
	// Fingerprint is the hex SHA-256 of the CA certificate's DER ("" when there is no CA).
	Fingerprint string
	// Bundle is the system bundle used; Appended reports whether the CA was added to it now.
	Bundle   string
	Appended bool
	// Env are the "NAME=value" defaults to set for processes (for unset names only).
	Env []string
	// Errs are the steps that failed (the others still ran).
	Errs []error
}

// Install installs the CA found at root+CAPath into the trust stores under root ("/" in a
// sandbox; a temp dir in tests). getenv reports the current environment. No CA file → zero
// Result.
func Install(root string, getenv func(string) string) Result {
	var res Result
	caPEM, err := os.ReadFile(filepath.Join(root, CAPath))
	if errors.Is(err, fs.ErrNotExist) {
		return res
	}
	if err != nil {
		res.Errs = append(res.Errs, fmt.Errorf("read CA: %w", err))
		return res
	}
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		res.Errs = append(res.Errs, errors.New("CA file holds no PEM certificate"))
		return res
	}
	sum := sha256.Sum256(block.Bytes)
	res.Fingerprint = hex.EncodeToString(sum[:])
	certPEM := pem.EncodeToMemory(block)

	res.Bundle = Bundles[0]
	for _, b := range Bundles {
		if _, err := os.Stat(filepath.Join(root, b)); err == nil {
			res.Bundle = b
			break
		}
	}
	bundlePath := filepath.Join(root, res.Bundle)
	existing, err := os.ReadFile(bundlePath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		res.Errs = append(res.Errs, fmt.Errorf("read bundle: %w", err))
	} else if !containsDER(existing, block.Bytes) {
		if err := appendFile(bundlePath, existing, certPEM); err != nil {
			res.Errs = append(res.Errs, fmt.Errorf("append to %s: %w", res.Bundle, err))
		} else {
			res.Appended = true
		}
	}

	local := filepath.Join(root, LocalCopy)
	if cur, err := os.ReadFile(local); err != nil || !bytes.Equal(cur, certPEM) {
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			res.Errs = append(res.Errs, fmt.Errorf("copy CA: %w", err))
		} else if err := writeAtomic(local, certPEM); err != nil {
			res.Errs = append(res.Errs, fmt.Errorf("copy CA: %w", err))
		}
	}

	if getenv("NODE_EXTRA_CA_CERTS") == "" {
		res.Env = append(res.Env, "NODE_EXTRA_CA_CERTS="+CAPath)
	}
	for _, v := range BundleVars {
		if getenv(v) == "" {
			res.Env = append(res.Env, v+"="+res.Bundle)
		}
	}
	return res
}

// containsDER reports whether bundle holds a certificate with exactly der.
func containsDER(bundle, der []byte) bool {
	for {
		var b *pem.Block
		b, bundle = pem.Decode(bundle)
		if b == nil {
			return false
		}
		if b.Type == "CERTIFICATE" && bytes.Equal(b.Bytes, der) {
			return true
		}
	}
}

func appendFile(path string, existing, certPEM []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	var buf []byte
	if len(existing) > 0 && !bytes.HasSuffix(existing, []byte("\n")) {
		buf = append(buf, '\n')
	}
	buf = append(buf, "# Hutch egress CA\n"...)
	buf = append(buf, certPEM...)
	_, werr := f.Write(buf)
	return errors.Join(werr, f.Close())
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
