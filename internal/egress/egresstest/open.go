package egresstest

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
)

// OpenInternet is NewInternet for callers without a testing.TB (benchmarks, tools): it sets up
// the same fake internet and returns a stop function that stops the servers, removes the
// namespace, veth and route, deletes its temporary files and releases the machine-wide lock.
// Call stop exactly once. Errors: not root, ip, nft or git missing, or a setup step failing
// (everything set up so far is removed again).
func OpenInternet(cfg InternetConfig) (n *Internet, stop func(), err error) {
	if os.Geteuid() != 0 {
		return nil, nil, errors.New("egresstest: the fake internet needs root (network namespaces)")
	}
	for _, tool := range []string{"ip", "nft", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, nil, fmt.Errorf("egresstest: the fake internet needs %s: %w", tool, err)
		}
	}
	if cfg.GitUser == "" {
		cfg.GitUser = "x-access-token"
	}
	if cfg.GitToken == "" {
		cfg.GitToken = "hxnet-git-token"
	}
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("egresstest: lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("egresstest: lock: %w", err)
	}
	dir, err := os.MkdirTemp("", "hxnet-")
	if err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("egresstest: %w", err)
	}
	n = &Internet{GitUser: cfg.GitUser, GitToken: cfg.GitToken, RepoPath: "/repo.git",
		NSPath: "/var/run/netns/" + InternetNS, records: map[string][]netip.Addr{}, acks: map[string]chan int{}}
	stop = func() {
		for i := len(n.servers) - 1; i >= 0; i-- {
			n.servers[i]()
		}
		n.wg.Wait()
		teardownNet()
		os.RemoveAll(dir)
		lock.Close() // releases the flock
	}
	teardownNet() // leftovers of a crashed run (we hold the lock, so nobody else owns them)
	steps := []func() error{
		setupNet,
		func() error { return n.makeCerts(dir) },
		func() error { n.defaultRecords(cfg.Records); return n.makeRepo(dir) },
		func() error { return n.start(dir) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			stop()
			return nil, nil, fmt.Errorf("egresstest: %w", err)
		}
	}
	return n, stop, nil
}
