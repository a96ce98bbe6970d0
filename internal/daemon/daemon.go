// Package daemon wires hutchd together: the state directory and API token, the SQLite store,
// the image store, runc, network namespaces, the egress service, the sandbox manager and the
// HTTP API; then it recovers leftovers from an earlier run and serves until its context ends.
// Sandboxes keep running when hutchd stops; the next hutchd re-adopts them.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/backup"
	"github.com/hutchdev/hutch/internal/blob"
	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/connlimit"
	"github.com/hutchdev/hutch/internal/console"
	"github.com/hutchdev/hutch/internal/egress"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/mitm"
	"github.com/hutchdev/hutch/internal/egress/proxy"
	"github.com/hutchdev/hutch/internal/hostclaim"
	"github.com/hutchdev/hutch/internal/image"
	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/runtime/runc"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/server"
	"github.com/hutchdev/hutch/internal/snapshot"
	"github.com/hutchdev/hutch/internal/store"
)

// Version is hutchd's version string.
const Version = "0.1.0"

// ReadHeaderTimeout is how long the API and preview listeners wait for a request's headers
// (and, with TLS, the handshake): a real client sends them at once, and each half-sent request
// holds a connection until then.
const ReadHeaderTimeout = 10 * time.Second

// InfoFile is written in the state dir at start so the CLI finds the daemon: {"url", "pid"}.
const InfoFile = "hutchd.json"

// claimHostNames claims cfg's state directory, cgroup parent, netns and veth prefixes and
// nftables table for this process (hostclaim.Take); the prefixes also against any
// prefix another daemon holds that overlaps them.
func claimHostNames(cfg config.Config) (*hostclaim.Claims, error) {
	state, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if s, err := filepath.EvalSymlinks(state); err == nil {
		state = s
	}
	return hostclaim.Take(hostclaim.DefaultDir, []hostclaim.Name{
		{Kind: "state directory", Value: state, Flag: "--state-dir"},
		{Kind: "cgroup parent", Value: cfg.CgroupParent, Flag: "--cgroup-parent"},
		{Kind: "netns prefix", Value: cfg.NSPrefix, Flag: "--netns-prefix", Prefix: true},
		{Kind: "veth prefix", Value: cfg.IfPrefix, Flag: "--if-prefix", Prefix: true},
		{Kind: "nftables table", Value: cfg.NftTable, Flag: "--nft-table"},
	})
}

// Run runs hutchd until ctx is cancelled.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.StateDir, 0o711); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	budget := newFDBudget(cfg, raiseNoFile(log))
	log.Info("connection caps", "egress_proxy", budget.proxyConns, "egress_dns_tcp", budget.dnsTCPConns,
		"api", budget.client.Total, "preview", budget.client.Total, "preview_per_sandbox", budget.client.PerKey,
		"unauthenticated_per_address", budget.client.PerAddr)
	// The names whose leftovers Recover removes are this daemon's alone while it runs: a
	// second hutchd sharing one refuses to start rather than kill this one's sandboxes.
	claims, err := claimHostNames(cfg)
	if err != nil {
		return err
	}
	defer claims.Release()
	cred, err := loadToken(cfg, log)
	if err != nil {
		return err
	}

	st, err := store.Open(ctx, filepath.Join(cfg.StateDir, "hutch.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	// Secrets and sandbox CA keys are sealed with the host master key.
	box, err := secret.LoadOrCreateKey(filepath.Join(cfg.StateDir, "keys", "master.key"))
	if err != nil {
		return err
	}
	secrets := secret.NewStore(st, box)
	authority := mitm.NewAuthority(st, box, 0, log.With("component", "egress-ca"))

	// The audit log: requests through the API and decisions hutchd takes by itself (from
	// recovery on), in <state>/audit.log.
	auditLog, err := openAuditLog(cfg)
	if err != nil {
		return err
	}
	defer auditLog.Close()
	auditLogger := slog.New(slog.NewJSONHandler(auditLog, nil))
	decisions := server.NewDecisionLog(auditLogger)

	violationStop := &stopper{log: log.With("component", "egress"), audit: decisions}
	handlers, err := egressHandlers(cfg.EgressHandlers)
	if err != nil {
		return err
	}
	egressRoots, err := upstreamRoots(cfg.EgressRootCAs)
	if err != nil {
		return err
	}

	rt, err := runc.New(runc.Config{
		Binary:       cfg.RuncBinary,
		Root:         filepath.Join(cfg.StateDir, "runc"),
		BundleDir:    filepath.Join(cfg.StateDir, "bundles"),
		CgroupParent: cfg.CgroupParent,
	}, log.With("component", "runc"))
	if err != nil {
		return err
	}
	subnet := netip.MustParsePrefix(cfg.Subnet)
	nets, err := netns.New(netns.Config{IfPrefix: cfg.IfPrefix, NSPrefix: cfg.NSPrefix, Subnet: subnet}, log.With("component", "netns"))
	if err != nil {
		return err
	}
	// Egress audit log: <state>/sandboxes/<id>/egress.jsonl, and cfg.EgressLogFiles rotated ones.
	egressAudit, err := audit.New(filepath.Join(cfg.StateDir, "sandboxes"), int64(cfg.EgressLogMaxBytes), 1+cfg.EgressLogFiles, log.With("component", "egress-audit"))
	if err != nil {
		return err
	}
	defer egressAudit.Close()
	eg, err := egress.New(egress.Config{
		Audit:   egressAudit,
		DNSPort: cfg.DNSPort, HTTPPort: cfg.HTTPPort, TLSPort: cfg.TLSPort,
		Table: cfg.NftTable, IfPrefix: cfg.IfPrefix, Upstreams: cfg.Upstreams,
		DenyRanges:    cfg.DenyPrefixes(),
		MaxProxyConns: budget.proxyConns, MaxDNSTCPConns: budget.dnsTCPConns,
		Resolver: egressResolver(cfg.EgressDNS),
		Intercept: &proxy.InterceptConfig{
			Leaf: authority.Leaf, Secret: secrets.Value, RootCAs: egressRoots,
			Placeholders: st.Placeholders, OnStop: violationStop.stop,
			Handlers: handlers,
		},
	}, log.With("component", "egress"))
	if err != nil {
		return err
	}
	if err := eg.Start(ctx); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("egress: %w (is another hutchd running? a second instance needs its own --dns-port, --http-port, --tls-port, --nft-table, --if-prefix, --netns-prefix, --subnet, --cgroup-parent and --state-dir)", err)
		}
		return fmt.Errorf("egress: %w", err)
	}
	defer eg.Close()

	imgs := &images{store: image.NewStore(cfg.ImagesDir, log.With("component", "image")), log: log.With("component", "image")}
	dataDir, err := openDataDir(ctx, cfg, log.With("component", "volume"))
	if err != nil {
		return err
	}
	mgr, err := sandbox.New(sandbox.Config{
		StateDir:         cfg.StateDir,
		DataDir:          dataDir,
		AgentBinary:      cfg.AgentBinary,
		ExtraCACerts:     cfg.ExtraCACerts,
		StopGrace:        time.Duration(cfg.StopGrace),
		ProcessLogBytes:  cfg.ProcessLogBytes,
		ProcessRetention: time.Duration(cfg.ProcessRetention),
		DiskQuota:        cfg.DiskQuota == "on",
		NoSleepMemory:    cfg.SleepMemory == "off",
		UserNS:           cfg.UserNS == "on",
		MaxFrozen:        time.Duration(cfg.SnapshotMaxFrozen),
	}, log.With("component", "sandbox"), st, rt, imgs, networks{nets}, egressAdapter{eg}, overlay{})
	if err != nil {
		return err
	}
	defer mgr.Close()
	mgr.SetAuditor(decisions)
	if err := setupRuntimes(cfg, mgr, decisions, log); err != nil {
		return err
	}

	bk, blobs, err := openBackups(ctx, cfg, st, mgr, log.With("component", "backup"))
	if err != nil {
		return err
	}
	// Restores are mounts of backup trees extracted once into <data>/backup-trees.
	trees, err := bk.EnableMounts(filepath.Join(dataDir, "backup-trees"), mgr)
	if err != nil {
		return err
	}
	mgr.SetTreeSource(trees)
	bk.EnableHostArchive(mgr)
	gcCtx, stopGC := context.WithCancel(ctx)
	defer stopGC()
	// Snapshots: layers cached under <data>/layers, GC of unused ones at start and hourly.
	layers, err := snapshot.NewCache(filepath.Join(dataDir, "layers"), blobs, log.With("component", "snapshot"))
	if err != nil {
		return err
	}
	mgr.SetLayers(layers)
	snaps := snapshot.New(snapshot.Config{Blobs: blobs, Cache: layers, Sandboxes: mgr, Logger: log.With("component", "snapshot"),
		ForkJournal: filepath.Join(dataDir, "forks"),
		SleepKeep:   cfg.SleepSnapshotsKeep, QuotaBytes: int64(cfg.SnapshotQuotaBytes),
		Created: func(ctx context.Context, snap snapshot.Snapshot) error {
			return authority.RememberSnapshot(ctx, snap.ID, snap.SandboxID)
		}})
	mgr.SetSleepSnapshotter(snaps)
	violationStop.mgr.Store(mgr)
	creds := &egressCreds{ca: authority, db: st, snaps: snaps, policy: eg.Config().Policy}
	policies := &egressPolicies{eg: eg, db: st, audit: egressAudit, log: log.With("component", "egress"), snaps: snaps, next: creds,
		lookups: egressLookups(secrets.Exists, cfg.Upstreams, handlers)}
	if err := policies.load(ctx); err != nil {
		return err
	}
	mgr.SetEgressCredentials(policies)
	// Recover after the snapshotter and the tree source are set: a sleep cut short takes its
	// snapshot, and sandboxes started later mount their restored backups.
	if err := mgr.Recover(ctx); err != nil {
		// Recovery problems are logged, not fatal: the daemon still serves, and each sandbox
		// is torn down again before its next start.
		log.Error("recovery incomplete", "err", err)
	}
	// Forks a crash cut short are rolled back once their sandboxes are recovered.
	if err := snaps.RecoverForks(ctx); err != nil {
		log.Error("fork recovery incomplete", "err", err)
	}
	go bk.RunGC(gcCtx, time.Duration(cfg.BackupGCInterval))
	go snaps.RunGC(gcCtx, time.Hour)

	ports, pv, err := newPreview(cfg, st, st, mgr, log.With("component", "preview"))
	if err != nil {
		return err
	}
	// Client connections are capped per listener (fdBudget), well below the fd limit, so a
	// flood of idle or half-sent connections cannot starve hutchd's own descriptors: agent
	// connections, egress, SQLite, logs.
	lims := budget.client
	if pv != nil {
		pv.ln = connlimit.New("preview", lims, log.With("component", "preview")).Wrap(pv.ln)
		defer pv.ln.Close() // when Run fails before serving
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen: %w (is another hutchd running? see %s)", err, filepath.Join(cfg.StateDir, InfoFile))
		}
		return fmt.Errorf("listen: %w", err)
	}
	ln = connlimit.New("api", lims, log.With("component", "api")).Wrap(ln)
	url := "http://" + ln.Addr().String()
	if err := writeInfo(cfg.StateDir, url); err != nil {
		ln.Close()
		return err
	}
	defer os.Remove(filepath.Join(cfg.StateDir, InfoFile))
	api := server.New(log.With("component", "api"), cred.token, mgr, imgs, ports, Version)
	if cred.token == "" {
		api.SetTokenSum(cred.sum)
	}
	if cfg.APIRateLimit < 0 {
		api.SetRateLimit(0, 0)
	} else {
		api.SetRateLimit(float64(cfg.APIRateLimit), 5*cfg.APIRateLimit)
	}
	api.SetMaxUpload(int64(cfg.MaxUploadBytes))
	api.SetBackups(bk)
	api.SetSnapshots(snaps)
	api.SetSecrets(secretsAPI{Store: secrets, db: st})
	api.SetEgressCA(creds)
	api.SetEgressPolicies(policies)
	api.SetConsole(console.New(cfg.ConsoleDir, log.With("component", "console")))
	api.SetAuditLog(auditLogger)
	if cfg.ConsoleDir != "" {
		log.Info("web console", "url", url+console.Prefix, "dir", cfg.ConsoleDir)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       5 * time.Minute,
		ConnContext:       connlimit.ConnContext,
		ConnState:         connlimit.ConnState,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	srv.RegisterOnShutdown(api.CloseStreams)
	log.Info("hutchd serving", "url", url, "state_dir", cfg.StateDir, "token", cred.where, "version", Version)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if pv != nil {
		log.Info("preview listener serving", "url", pv.URL(), "domain", cfg.PreviewDomain)
		go func() { errc <- fmt.Errorf("preview: %w", pv.serve()) }()
	}
	var serveErr error
	select {
	case err := <-errc:
		serveErr = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if pv != nil {
		// Long preview streams would hold the API's shutdown: both drain in parallel.
		done := make(chan struct{})
		go func() { defer close(done); pv.shutdown(shutCtx) }()
		defer func() { <-done }()
	}
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown", "err", err)
	}
	if serveErr != nil {
		return serveErr
	}
	log.Info("hutchd stopped; sandboxes keep running")
	return nil
}

// The backup service holds a sandbox awake during a backup or restore through this method.
var _ interface{ Hold(id string) func() } = (*sandbox.Manager)(nil)

// openBackups opens the blob store cfg names and returns the backup service on it.
func openBackups(ctx context.Context, cfg config.Config, st *store.Store, mgr *sandbox.Manager, log *slog.Logger) (*backup.Service, blob.Store, error) {
	blobs, err := blob.Open(ctx, blob.Config{
		Kind: cfg.BlobStore,
		// Temp files of uploads a killed hutchd left are removed once as old as orphan archives.
		Local: blob.LocalConfig{Dir: cfg.BlobDir, StaleTempAge: time.Duration(cfg.BackupOrphanAge)},
		S3: blob.S3Config{Endpoint: cfg.S3Endpoint, Bucket: cfg.S3Bucket, Region: cfg.S3Region, AccessKey: cfg.S3AccessKey,
			SecretKey: cfg.S3SecretKey, Prefix: cfg.S3Prefix, TLS: cfg.S3TLS},
	}, log)
	if err != nil {
		return nil, nil, fmt.Errorf("blob store: %w", err)
	}
	log.Info("blob store", "store", blobs.Describe())
	return backup.New(backup.Config{Blobs: blobs, Store: st, Agents: mgr, OrphanAge: time.Duration(cfg.BackupOrphanAge), Logger: log}), blobs, nil
}

func writeInfo(stateDir, url string) error {
	b, _ := json.Marshal(map[string]any{"url": url, "pid": os.Getpid()})
	tmp := filepath.Join(stateDir, InfoFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", InfoFile, err)
	}
	return os.Rename(tmp, filepath.Join(stateDir, InfoFile))
}
