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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/auditlog"
	"github.com/hutchdev/hutch/internal/backup"
	"github.com/hutchdev/hutch/internal/blob"
	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/connlimit"
	"github.com/hutchdev/hutch/internal/console"
	"github.com/hutchdev/hutch/internal/datavol"
	"github.com/hutchdev/hutch/internal/egress"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/dns"
	"github.com/hutchdev/hutch/internal/egress/mitm"
	"github.com/hutchdev/hutch/internal/egress/policystore"
	"github.com/hutchdev/hutch/internal/egress/proxy"
	"github.com/hutchdev/hutch/internal/egress/webhook"
	"github.com/hutchdev/hutch/internal/hostclaim"
	"github.com/hutchdev/hutch/internal/image"
	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/preview"
	"github.com/hutchdev/hutch/internal/runtime/runc"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/server"
	"github.com/hutchdev/hutch/internal/snapshot"
	"github.com/hutchdev/hutch/internal/store"
	"github.com/hutchdev/hutch/internal/token"
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

// Run runs hutchd until ctx is cancelled, in phases: storage (state, store, keys, audit log),
// network (runc, namespaces, egress), sandboxes (the manager and the services built on it),
// recovery and background jobs, the API listener, and serving until ctx ends. What a phase
// opens is closed when Run returns, in reverse order.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	d := &hutchd{cfg: cfg, log: log}
	defer d.closeAll()
	if err := d.openStorage(ctx); err != nil {
		return err
	}
	if err := d.startNetwork(ctx); err != nil {
		return err
	}
	if err := d.buildSandboxes(ctx); err != nil {
		return err
	}
	if err := d.startServices(ctx); err != nil {
		return err
	}
	if err := d.listenAPI(); err != nil {
		return err
	}
	return d.serve(ctx)
}

// hutchd is what Run builds, phase by phase; each phase reads what earlier ones set.
type hutchd struct {
	cfg     config.Config
	log     *slog.Logger
	closers []func() // run in reverse by closeAll

	// storage
	budget    fdBudget
	cred      token.Credential
	st        *store.Store
	secrets   *secret.Store
	authority *mitm.Authority
	decisions *auditlog.DecisionLog
	auditLog  *slog.Logger

	// network
	rt          *runc.Runtime
	nets        *netns.Manager
	egressAudit *audit.Log
	eg          *egress.Service
	handlers    map[string]*webhook.Handler
	stop        *stopper

	// sandboxes
	imgs     images
	mgr      *sandbox.Manager
	bk       *backup.Service
	snaps    *snapshot.Service
	creds    *policystore.Credentials
	policies *policystore.Policies

	// API
	ports *preview.Service
	pv    *previewServer
	ln    net.Listener
	url   string
	api   *server.Server
}

func (d *hutchd) onClose(f func()) { d.closers = append(d.closers, f) }

func (d *hutchd) closeAll() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// openStorage claims the host names, loads the API credential and opens the store, the
// master key, the secret store, the egress CA authority and the audit log.
func (d *hutchd) openStorage(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	if err := os.MkdirAll(cfg.StateDir, 0o711); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	d.budget = newFDBudget(cfg, raiseNoFile(log))
	log.Info("connection caps", "egress_proxy", d.budget.proxyConns, "egress_dns_tcp", d.budget.dnsTCPConns,
		"api", d.budget.client.Total, "preview", d.budget.client.Total, "preview_per_sandbox", d.budget.client.PerKey,
		"unauthenticated_per_address", d.budget.client.PerAddr)
	// The names whose leftovers Recover removes are this daemon's alone while it runs: a
	// second hutchd sharing one refuses to start rather than kill this one's sandboxes.
	claims, err := claimHostNames(cfg)
	if err != nil {
		return err
	}
	d.onClose(claims.Release)
	if d.cred, err = token.LoadCredential(cfg.StateDir, cfg.TokenHashFile, log); err != nil {
		return err
	}
	if d.st, err = store.Open(ctx, filepath.Join(cfg.StateDir, "hutch.db")); err != nil {
		return err
	}
	d.onClose(func() { d.st.Close() })
	// Secrets and sandbox CA keys are sealed with the host master key.
	box, err := secret.LoadOrCreateKey(filepath.Join(cfg.StateDir, "keys", "master.key"))
	if err != nil {
		return err
	}
	d.secrets = secret.NewStore(d.st, box)
	d.authority = mitm.NewAuthority(d.st, box, 0, log.With("component", "egress-ca"))

	// The audit log: requests through the API and decisions hutchd takes by itself (from
	// recovery on), in <state>/audit.log.
	al, err := auditlog.Open(filepath.Join(cfg.StateDir, auditlog.File), int64(cfg.AuditLogMaxBytes), cfg.AuditLogFiles)
	if err != nil {
		return err
	}
	d.onClose(func() { al.Close() })
	d.auditLog = al.Logger()
	d.decisions = auditlog.NewDecisionLog(d.auditLog)
	return nil
}

// startNetwork builds runc, the network namespaces and the egress service, and starts egress.
func (d *hutchd) startNetwork(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	d.stop = &stopper{log: log.With("component", "egress"), audit: d.decisions}
	var err error
	if d.handlers, err = webhook.NewAll(cfg.EgressHandlers); err != nil {
		return err
	}
	egressRoots, err := proxy.LoadRootCAs(cfg.EgressRootCAs)
	if err != nil {
		return err
	}
	d.rt, err = runc.New(runc.Config{
		Binary:       cfg.RuncBinary,
		Root:         filepath.Join(cfg.StateDir, "runc"),
		BundleDir:    filepath.Join(cfg.StateDir, "bundles"),
		CgroupParent: cfg.CgroupParent,
	}, log.With("component", "runc"))
	if err != nil {
		return err
	}
	subnet := netip.MustParsePrefix(cfg.Subnet)
	if d.nets, err = netns.New(netns.Config{IfPrefix: cfg.IfPrefix, NSPrefix: cfg.NSPrefix, Subnet: subnet}, log.With("component", "netns")); err != nil {
		return err
	}
	// Egress audit log: <state>/sandboxes/<id>/egress.jsonl, and cfg.EgressLogFiles rotated ones.
	d.egressAudit, err = audit.New(filepath.Join(cfg.StateDir, "sandboxes"), int64(cfg.EgressLogMaxBytes), 1+cfg.EgressLogFiles, log.With("component", "egress-audit"))
	if err != nil {
		return err
	}
	d.onClose(func() { d.egressAudit.Close() })
	d.eg, err = egress.New(egress.Config{
		Audit:   d.egressAudit,
		DNSPort: cfg.DNSPort, HTTPPort: cfg.HTTPPort, TLSPort: cfg.TLSPort,
		Table: cfg.NftTable, IfPrefix: cfg.IfPrefix, Upstreams: cfg.Upstreams,
		DenyRanges:    cfg.DenyPrefixes(),
		MaxProxyConns: d.budget.proxyConns, MaxDNSTCPConns: d.budget.dnsTCPConns,
		Resolver: dns.ServersResolver(cfg.EgressDNS),
		Intercept: &proxy.InterceptConfig{
			Leaf: d.authority.Leaf, Secret: d.secrets.Value, RootCAs: egressRoots,
			Placeholders: d.st.Placeholders, OnStop: d.stop.stop,
			Handlers: d.handlers,
		},
	}, log.With("component", "egress"))
	if err != nil {
		return err
	}
	if err := d.eg.Start(ctx); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("egress: %w (is another hutchd running? a second instance needs its own --dns-port, --http-port, --tls-port, --nft-table, --if-prefix, --netns-prefix, --subnet, --cgroup-parent and --state-dir)", err)
		}
		return fmt.Errorf("egress: %w", err)
	}
	d.onClose(func() { d.eg.Close() })
	return nil
}

// buildSandboxes builds the sandbox manager and the services on it. What the manager needs
// comes first (the blob store, the layer and tree caches, the egress policies and
// credentials, which need no manager); the backup and snapshot services, which drive the
// manager, come after it. The manager reaches the snapshot service (sleep snapshots) through
// a func that answers nil until it exists.
func (d *hutchd) buildSandboxes(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	d.imgs = images{image.NewStore(cfg.ImagesDir, log.With("component", "image"))}
	dataDir, err := datavol.OpenDataDir(ctx, datavol.DataDirConfig{StateDir: cfg.StateDir, Image: cfg.DataVolume, Size: cfg.DataVolumeSize},
		log.With("component", "volume"))
	if err != nil {
		return err
	}
	blobs, err := openBlobs(ctx, cfg, log.With("component", "backup"))
	if err != nil {
		return err
	}
	// Restores are mounts of backup trees extracted once into <data>/backup-trees.
	trees, err := backup.OpenTrees(filepath.Join(dataDir, "backup-trees"), blobs, log.With("component", "backup"))
	if err != nil {
		return err
	}
	// Snapshots: layers cached under <data>/layers, GC of unused ones at start and hourly.
	layers, err := snapshot.NewCache(filepath.Join(dataDir, "layers"), blobs, log.With("component", "snapshot"))
	if err != nil {
		return err
	}
	records := snapshot.Records{Blobs: blobs}
	d.creds = &policystore.Credentials{CA: d.authority, Store: d.st, Snapshots: records, Policy: d.eg.Config().Policy}
	d.policies = policystore.New(policystore.Config{
		Registry: d.eg, Store: d.st, Audit: d.egressAudit, Snapshots: records, Next: d.creds,
		Lookups: policystore.Lookups(d.secrets.Exists, cfg.Upstreams, d.handlers),
		Log:     log.With("component", "egress"),
	})
	var snaps atomic.Pointer[snapshot.Service]
	d.mgr, err = sandbox.New(sandbox.Config{
		StateDir:         cfg.StateDir,
		DataDir:          dataDir,
		AgentBinary:      cfg.AgentBinary,
		ExtraCACerts:     cfg.ExtraCACerts,
		StopGrace:        time.Duration(cfg.StopGrace),
		ProcessLogBytes:  cfg.ProcessLogBytes,
		ProcessRetention: time.Duration(cfg.ProcessRetention),
		DiskQuota:        bool(cfg.DiskQuota),
		NoSleepMemory:    !bool(cfg.SleepMemory),
		UserNS:           bool(cfg.UserNS),
		MaxFrozen:        time.Duration(cfg.SnapshotMaxFrozen),
	}, log.With("component", "sandbox"), sandbox.Deps{
		Store: d.st, Runtime: d.rt, Images: d.imgs, Networks: networks{d.nets}, Egress: egressAdapter{d.eg}, RootFS: overlay{},
		Layers: layers, Trees: trees, EgressCredentials: d.policies, Auditor: d.decisions,
		SleepSnapshotter: func() sandbox.SleepSnapshotter {
			if s := snaps.Load(); s != nil {
				return s
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	d.onClose(d.mgr.Close)
	if err := setupRuntimes(cfg, d.mgr, d.decisions, log); err != nil {
		return err
	}
	d.bk = backup.New(backup.Config{Blobs: blobs, Store: d.st, Agents: d.mgr, OrphanAge: time.Duration(cfg.BackupOrphanAge),
		Logger: log.With("component", "backup"), Trees: trees, Mounter: d.mgr, HostArchive: d.mgr})
	d.snaps = snapshot.New(snapshot.Config{Blobs: blobs, Cache: layers, Sandboxes: d.mgr, Logger: log.With("component", "snapshot"),
		ForkJournal: filepath.Join(dataDir, "forks"),
		SleepKeep:   cfg.SleepSnapshotsKeep, QuotaBytes: int64(cfg.SnapshotQuotaBytes),
		Created: func(ctx context.Context, snap snapshot.Snapshot) error {
			return d.authority.RememberSnapshot(ctx, snap.ID, snap.SandboxID)
		}})
	snaps.Store(d.snaps)
	d.stop.mgr.Store(d.mgr)
	return nil
}

// startServices installs the stored egress policies, recovers what an earlier hutchd left
// (sandboxes, then cut-short forks), starts the backup and snapshot GC and builds the
// preview service and listener.
func (d *hutchd) startServices(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	if err := d.policies.Load(ctx); err != nil {
		return err
	}
	// Recover once the manager has its snapshotter and tree source: a sleep cut short takes
	// its snapshot, and sandboxes started later mount their restored backups.
	if err := d.mgr.Recover(ctx); err != nil {
		// Recovery problems are logged, not fatal: the daemon still serves, and each sandbox
		// is torn down again before its next start.
		log.Error("recovery incomplete", "err", err)
	}
	// Forks a crash cut short are rolled back once their sandboxes are recovered.
	if err := d.snaps.RecoverForks(ctx); err != nil {
		log.Error("fork recovery incomplete", "err", err)
	}
	gcCtx, stopGC := context.WithCancel(ctx)
	d.onClose(stopGC)
	go d.bk.RunGC(gcCtx, time.Duration(cfg.BackupGCInterval))
	go d.snaps.RunGC(gcCtx, time.Hour)

	var err error
	d.ports, d.pv, err = newPreview(cfg, d.st, d.st, d.mgr, log.With("component", "preview"))
	if err != nil {
		return err
	}
	// Client connections are capped per listener (fdBudget), well below the fd limit, so a
	// flood of idle or half-sent connections cannot starve hutchd's own descriptors: agent
	// connections, egress, SQLite, logs.
	if d.pv != nil {
		d.pv.ln = connlimit.New("preview", d.budget.client, log.With("component", "preview")).Wrap(d.pv.ln)
		d.onClose(func() { d.pv.ln.Close() }) // when Run fails before serving
	}
	return nil
}

// listenAPI opens the API listener, writes the info file the CLI finds hutchd by and builds
// the API server over every service.
func (d *hutchd) listenAPI() error {
	cfg, log := d.cfg, d.log
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen: %w (is another hutchd running? see %s)", err, filepath.Join(cfg.StateDir, InfoFile))
		}
		return fmt.Errorf("listen: %w", err)
	}
	d.ln = connlimit.New("api", d.budget.client, log.With("component", "api")).Wrap(ln)
	d.url = "http://" + d.ln.Addr().String()
	if err := writeInfo(cfg.StateDir, d.url); err != nil {
		d.ln.Close()
		return err
	}
	d.onClose(func() { os.Remove(filepath.Join(cfg.StateDir, InfoFile)) })
	deps := server.Deps{
		Token: d.cred.Token, Manager: d.mgr, Images: d.imgs, Ports: d.ports, Version: Version,
		// A rate <= 0 (the flag's "off" is -1) turns rate limiting off.
		RateLimit:      &server.RateLimit{Rate: float64(cfg.APIRateLimit), Burst: 5 * cfg.APIRateLimit},
		MaxUpload:      int64(cfg.MaxUploadBytes),
		Backups:        d.bk,
		Snapshots:      d.snaps,
		Secrets:        policystore.Secrets{Store: d.secrets, DB: d.st},
		EgressCA:       d.creds,
		EgressPolicies: d.policies,
		Console:        console.New(cfg.ConsoleDir, log.With("component", "console")),
		AuditLog:       d.auditLog,
	}
	if d.cred.Token == "" {
		deps.TokenSum = d.cred.Sum
	}
	d.api = server.New(log.With("component", "api"), deps)
	if cfg.ConsoleDir != "" {
		log.Info("web console", "url", d.url+console.Prefix, "dir", cfg.ConsoleDir)
	}
	return nil
}

// serve serves the API (and the preview listener) until ctx ends or a listener fails, then
// shuts both down.
func (d *hutchd) serve(ctx context.Context) error {
	cfg, log, pv := d.cfg, d.log, d.pv
	srv := &http.Server{
		Handler:           d.api,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       5 * time.Minute,
		ConnContext:       connlimit.ConnContext,
		ConnState:         connlimit.ConnState,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	srv.RegisterOnShutdown(d.api.CloseStreams)
	log.Info("hutchd serving", "url", d.url, "state_dir", cfg.StateDir, "token", d.cred.Where, "version", Version)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(d.ln) }()
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
var _ interface{ Hold(id sandboxid.ID) func() } = (*sandbox.Manager)(nil)

// openBlobs opens the blob store cfg names (backups and snapshots).
func openBlobs(ctx context.Context, cfg config.Config, log *slog.Logger) (blob.Store, error) {
	blobs, err := blob.Open(ctx, blob.Config{
		Kind: cfg.BlobStore,
		// Temp files of uploads a killed hutchd left are removed once as old as orphan archives.
		Local: blob.LocalConfig{Dir: cfg.BlobDir, StaleTempAge: time.Duration(cfg.BackupOrphanAge)},
		S3: blob.S3Config{Endpoint: cfg.S3Endpoint, Bucket: cfg.S3Bucket, Region: cfg.S3Region, AccessKey: cfg.S3AccessKey,
			SecretKey: cfg.S3SecretKey, Prefix: cfg.S3Prefix, TLS: cfg.S3TLS},
	}, log)
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	log.Info("blob store", "store", blobs.Describe())
	return blobs, nil
}

func writeInfo(stateDir, url string) error {
	b, _ := json.Marshal(map[string]any{"url": url, "pid": os.Getpid()})
	tmp := filepath.Join(stateDir, InfoFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", InfoFile, err)
	}
	return os.Rename(tmp, filepath.Join(stateDir, InfoFile))
}
