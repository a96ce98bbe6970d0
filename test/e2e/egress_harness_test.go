package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/daemontest"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
)

// egressDaemonNames are the host resources of one egress test daemon: each test that needs
// the fake internet runs a hutchd of its own, with names, ports and a subnet no other test
// daemon uses (so it never collides with the shared daemon or another egress test).
type egressDaemonNames struct {
	tag      string // state dir prefix, cgroup parent and nft table: "hutch"+tag
	ifPrefix string // veth prefix, 3 letters
	nsPrefix string
	subnet   string
	portBase int // DNS on portBase+53, HTTP +1, TLS +2
	// trustUpstream adds the fake internet's CA to the roots for intercepted upstreams.
	trustUpstream bool
}

// table is the daemon's nftables table.
func (n egressDaemonNames) table() string { return "hutch" + n.tag }

// egressDaemon starts a hutchd that resolves sandbox destinations through the fake internet's
// DNS, and destroys its sandboxes and stops it when t ends (then runs after, if set).
func egressDaemon(t *testing.T, inet *egresstest.Internet, n egressDaemonNames, after func()) *daemontest.Daemon {
	t.Helper()
	state, err := os.MkdirTemp("", "hutch-e2e-"+n.tag+"-")
	if err != nil {
		t.Fatal(err)
	}
	dm, err := daemontest.New(bins, state, filepath.Join(state, "hutchd.log"))
	if err != nil {
		t.Fatal(err)
	}
	dm.Args = []string{
		"--images-dir", imagesDir(),
		"--if-prefix", n.ifPrefix,
		"--netns-prefix", n.nsPrefix,
		"--nft-table", n.table(),
		"--cgroup-parent", n.table(),
		"--subnet", n.subnet,
		"--dns-port", strconv.Itoa(n.portBase + 53),
		"--http-port", strconv.Itoa(n.portBase + 1),
		"--tls-port", strconv.Itoa(n.portBase + 2),
		"--preview-listen", "off",
		"--data-volume", "off",
		"--log-level", "debug",
		"--egress-dns", inet.DNSAddr(),
		"--runtime", defaultRuntime,
	}
	if n.trustUpstream {
		dm.Args = append(dm.Args, "--egress-root-ca", inet.CAFile)
	}
	if err := dm.Start(context.Background()); err != nil {
		t.Fatalf("start hutchd: %v\n%s", err, dm.LogTail())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := dm.DestroyAll(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		dm.Stop()
		cleanupState(dm)
		if after != nil {
			after()
		}
	})
	return dm
}
