package proxy

import (
	"crypto/x509"
	"fmt"
	"os"
)

// LoadRootCAs is InterceptConfig.RootCAs for files: the system root pool plus the PEM
// certificates in files (for upstreams of intercepted hosts signed by a private CA). No files:
// nil (the system roots). A file that cannot be read or holds no PEM certificate is an error.
func LoadRootCAs(files []string) (*x509.CertPool, error) {
	if len(files) == 0 {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("egress root CA: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("egress root CA %s: no PEM certificate", f)
		}
	}
	return pool, nil
}
