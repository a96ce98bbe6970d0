package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/store"
)

// EgressCAPath is where a sandbox sees its egress CA certificate (read-only; never the key).
const EgressCAPath = "/run/hutch/egress-ca.pem"

// EgressStart is what a starting sandbox gets from the egress credential side.
type EgressStart struct {
	// CACertPEM is the sandbox's egress CA certificate: appended to the CA bundle hutchd
	// mounts and mounted alone at EgressCAPath. Empty: none.
	CACertPEM []byte
	// Env are extra environment variables of PID 1 (placeholders of bound secrets).
	Env map[string]string
}

// EgressCredentials prepares a sandbox's egress CA and placeholders at each start. It must
// keep both stable across starts of one sandbox.
type EgressCredentials interface {
	Prepare(ctx context.Context, rec store.Sandbox) (EgressStart, error)
}

// prepareEgress asks the credential side for rec's CA and env; zero when disabled.
func (m *Manager) prepareEgress(ctx context.Context, rec store.Sandbox) (EgressStart, error) {
	if m.egressCreds == nil {
		return EgressStart{}, nil
	}
	es, err := m.egressCreds.Prepare(ctx, rec)
	if err != nil {
		return EgressStart{}, fmt.Errorf("egress credentials: %w", err)
	}
	return es, nil
}

// writeEgressCA writes the CA certificate into the sandbox's etc dir and returns its mount.
func writeEgressCA(etc string, es EgressStart) ([]runtime.Mount, error) {
	if len(es.CACertPEM) == 0 {
		return nil, nil
	}
	src := filepath.Join(etc, "egress-ca.pem")
	if err := os.WriteFile(src, es.CACertPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write egress CA: %w", err)
	}
	return []runtime.Mount{{Source: src, Destination: EgressCAPath, ReadOnly: true}}, nil
}

// withEgressEnv returns env with es.Env set: an entry of env with the same name is replaced
// (libc takes the first of duplicates, Go the last: never leave two), the rest appended in a
// stable order.
func withEgressEnv(env []string, es EgressStart) []string {
	if len(es.Env) == 0 {
		return env
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, ok := es.Env[k]
		return ok
	})
	keys := make([]string, 0, len(es.Env))
	for k := range es.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+es.Env[k])
	}
	return env
}
