// Package config is hutchd's typed configuration: defaults, then an optional JSON file, then
// environment variables (HUTCH_*), then command-line flags, each overriding the one before. It is
// the only place hutchd reads its environment.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/datavol"
	"github.com/hutchdev/hutch/internal/egress/webhook"
)

// DefaultMaxConnsPerClient is MaxConnsPerClient's default: how many connections one client
// address may hold open on a listener before presenting a valid token. Real clients present
// theirs in their first request, milliseconds after connecting, and then stop counting, so
// this bounds only connections being opened at the same instant: far more than an SDK's or
// the e2e suite's concurrency from 127.0.0.1, or a browser's six per preview host, while a
// flood of half-sent requests from one address holds at most this many file descriptors.
const DefaultMaxConnsPerClient = 256

// Config is hutchd's configuration.
type Config struct {
	// StateDir holds the token, the SQLite database, images and sandboxes. Default /var/lib/hutch.
	StateDir string `json:"stateDir"`
	// Listen is the API address. Default 127.0.0.1:7411 (loopback only).
	Listen string `json:"listen"`
	// TokenHashFile, when set, is a file holding the SHA-256 of the API token
	// ("sha256:<64 hex digits>", as `hutch token hash` prints it): hutchd then runs in
	// hash-only mode, never writes the token in <StateDir>/token and refuses to start while that
	// file exists. Empty (the default): the token is kept in <StateDir>/token (mode 0600),
	// created on first start, for the local CLI.
	TokenHashFile string `json:"tokenHashFile"`
	// ImagesDir holds the base images. Default <StateDir>/images.
	ImagesDir string `json:"imagesDir"`
	// AgentBinary is the static hutch-init binary. Default: hutch-init next to hutchd.
	AgentBinary string `json:"agentBinary"`
	// RuncBinary is the runc executable. Default "runc" on PATH.
	RuncBinary string `json:"runcBinary"`
	// Runtime is the isolation runtime of sandboxes created without one: "runc" (default) or
	// "gvisor".
	Runtime string `json:"runtime"`
	// RunscBinary is gVisor's runsc executable. Default "runsc" on PATH; when it is missing,
	// the gvisor runtime is unavailable (RUNTIME_NOT_AVAILABLE).
	RunscBinary string `json:"runscBinary"`
	// RunscPlatform is gVisor's platform: "systrap" (default), "ptrace" or "kvm".
	RunscPlatform string `json:"runscPlatform"`
	// Subnet is cut into one /30 per sandbox. Default 10.88.0.0/16.
	Subnet string `json:"subnet"`
	// IfPrefix names the host side of each sandbox's veth (<prefix><slot>). Default "hsb".
	IfPrefix string `json:"ifPrefix"`
	// NSPrefix names network namespaces (/var/run/netns/<prefix><id>). Default "hutch-".
	NSPrefix string `json:"nsPrefix"`
	// CgroupParent is the cgroup holding one cgroup per sandbox. Default "hutch".
	CgroupParent string `json:"cgroupParent"`
	// NftTable is the nftables table (family inet) hutchd owns. Default "hutch".
	NftTable string `json:"nftTable"`
	// DNSPort, HTTPPort and TLSPort are the host ports of the egress listeners that sandbox
	// traffic is redirected to. Defaults 15053, 15001, 15002.
	DNSPort  int `json:"dnsPort"`
	HTTPPort int `json:"httpPort"`
	TLSPort  int `json:"tlsPort"`
	// Upstreams are operator-approved destinations a sandbox may reach although their address
	// is private or loopback: host name → "ip:port" (an internal git server, say). Sandboxes
	// reach them by name on port 80 (HTTP) or 443 (TLS).
	Upstreams map[string]string `json:"upstreams"`
	// DenyRanges are CIDR ranges sandboxes may never reach, on top of the built-in floor
	// (loopback, private, link-local, CGNAT, multicast, the host's addresses and the networks
	// its interfaces are on). For ranges an operator routes internally.
	DenyRanges []string `json:"denyRanges"`
	// ExtraCACerts are PEM files added to every sandbox's CA bundle. Default: the host's
	// locally added CAs, /usr/local/share/ca-certificates/*.crt (a corporate TLS proxy's CA must
	// be trusted inside too, since egress leaves through the host's network).
	ExtraCACerts []string `json:"extraCACerts"`
	// EgressRootCAs are PEM files hutchd trusts, besides the system roots, when it connects
	// to the upstream of an intercepted (credential-injected) host.
	EgressRootCAs []string `json:"egressRootCAs"`
	// EgressDNS are the DNS servers (ip:port) hutchd resolves sandbox destinations with;
	// empty: the host's resolver.
	EgressDNS []string `json:"egressDNS"`
	// EgressHandlers are the operator endpoints egress rules of action "handler" name:
	// {"name": {"url": "https://… | unix:/path.sock", "signingSecret": "SECRET_NAME",
	// "headerTimeout": "60s"}}. The signing key is the named secret (PUT /v1/secrets).
	EgressHandlers map[string]webhook.Config `json:"egressHandlers"`
	// PreviewListen is the address of the preview listener that serves preview URLs
	// ({port}-{sandbox}-{token}.{PreviewDomain}). Default 127.0.0.1:7412; empty string in a
	// config file keeps the default, "off" disables previews.
	PreviewListen string `json:"previewListen"`
	// PreviewDomain is the domain preview hosts are under. Default "localhost" (browsers resolve
	// *.localhost to loopback); production: a wildcard DNS name pointing at this host.
	PreviewDomain string `json:"previewDomain"`
	// PreviewTLSCert and PreviewTLSKey are PEM files (a wildcard certificate for
	// *.PreviewDomain). Both set: the preview listener serves HTTPS and URLs are https.
	PreviewTLSCert string `json:"previewTLSCert"`
	PreviewTLSKey  string `json:"previewTLSKey"`
	// PreviewPublicPort is the port written into preview URLs when clients reach the listener
	// through another port (a load balancer on 443, say). Default: the listener's port; 80 for
	// http and 443 for https are omitted from URLs.
	PreviewPublicPort int `json:"previewPublicPort"`
	// APIRateLimit is how many API requests per second one client address may start on average
	// (bursts of 5× that); -1 turns the limit off. Streams already open are never throttled.
	// Default 1000.
	APIRateLimit int `json:"apiRateLimit"`
	// MaxUploadBytes bounds the body of the streamed file upload (PUT
	// /v1/sandboxes/{id}/files), in bytes; past it: 413 REQUEST_TOO_LARGE. 0 (the default):
	// server.DefaultMaxUpload, 20 GB, the largest instance type's disk. Every other body is
	// bounded by server.MaxJSONBody.
	MaxUploadBytes int `json:"maxUploadBytes"`
	// PreviewMaxBodyBytes bounds the body of a request through a preview URL, in bytes; past
	// it: 413 REQUEST_TOO_LARGE. 0 (the default): preview.DefaultMaxRequestBody, 1 GiB.
	PreviewMaxBodyBytes int `json:"previewMaxBodyBytes"`
	// MaxConns is how many client connections the API listener may hold open at once, and the
	// preview listener as many again; past it the oldest connection that has not presented a
	// valid token is closed (internal/connlimit). 0 (the default): 10,000, or an eighth of
	// hutchd's RLIMIT_NOFILE when that is less, so the two listeners never take more than a
	// quarter of hutchd's file descriptors.
	MaxConns int `json:"maxConns"`
	// MaxConnsPerClient is how many connections one client IP address may hold open on each
	// of the API and preview listeners before it has presented a valid token (the API token,
	// a preview URL's token); past it its oldest such connection is closed. Connections that
	// presented one do not count. -1: no per-address cap. Default DefaultMaxConnsPerClient.
	MaxConnsPerClient int `json:"maxConnsPerClient"`
	// ProcessLogBytes is the default per-stream log buffer of a background process, in bytes
	// (older output is dropped past it, with a marker). Default 4 MiB.
	ProcessLogBytes int `json:"processLogBytes"`
	// ProcessRetention is how long records and logs of finished processes are kept. Default 1h.
	ProcessRetention Duration `json:"processRetention"`
	// StopGrace is how long a sandbox's processes get after SIGTERM. Default 5s.
	StopGrace Duration `json:"stopGrace"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `json:"logLevel"`
	// LogFile is the file hutchd writes its log to, rotated at LogMaxBytes keeping LogFiles
	// rotated files (LogFile.1 newest); empty (the default): standard error, for a supervisor
	// that bounds it (journald).
	LogFile string `json:"logFile"`
	// LogMaxBytes and LogFiles bound LogFile on disk to (1+LogFiles)×LogMaxBytes. Defaults
	// 16 MiB and 3.
	LogMaxBytes int `json:"logMaxBytes"`
	LogFiles    int `json:"logFiles"`
	// LogValueMaxBytes is the most bytes of the message and of any one value of a log line;
	// longer ones are cut with a "…[N bytes cut]" marker. Default 1024.
	LogValueMaxBytes int `json:"logValueMaxBytes"`
	// LogSandboxRate is how many log lines per second one sandbox may cause on average at each
	// level, in bursts of 10× that; the rest are counted and reported once a minute per sandbox ("log
	// lines suppressed"). -1 turns the limit off. Default 5.
	LogSandboxRate int `json:"logSandboxRate"`
	// AuditLogMaxBytes and AuditLogFiles bound <StateDir>/audit.log the same way. Defaults
	// 16 MiB and 3.
	AuditLogMaxBytes int `json:"auditLogMaxBytes"`
	AuditLogFiles    int `json:"auditLogFiles"`
	// EgressLogMaxBytes and EgressLogFiles bound each sandbox's egress event file
	// (<StateDir>/sandboxes/<id>/egress.jsonl) the same way. Defaults 8 MiB and 2.
	EgressLogMaxBytes int `json:"egressLogMaxBytes"`
	EgressLogFiles    int `json:"egressLogFiles"`

	// BlobStore is where backups are kept: "local" (a directory, the default) or "s3"
	// (S3-compatible object storage, the S3* keys).
	BlobStore string `json:"blobStore"`
	// BlobDir is the local blob store's directory. Default <StateDir>/blobs.
	BlobDir string `json:"blobDir"`
	// S3Endpoint is host[:port] of the S3 API (an http:// or https:// scheme decides TLS).
	S3Endpoint string `json:"s3Endpoint"`
	// S3Bucket holds the blobs (required for "s3").
	S3Bucket string `json:"s3Bucket"`
	// S3Region is the bucket's region. Default us-east-1.
	S3Region string `json:"s3Region"`
	// S3AccessKey and S3SecretKey are static credentials (prefer the env twins or the config
	// file over flags: flags show in ps).
	S3AccessKey string `json:"s3AccessKey"`
	S3SecretKey string `json:"s3SecretKey"`
	// S3Prefix is prepended to every key in the bucket ("hutch/").
	S3Prefix string `json:"s3Prefix"`
	// S3TLS selects https to the endpoint.
	S3TLS bool `json:"s3TLS"`
	// BackupGCInterval is how often expired backups and orphan archives are removed. Default 10m.
	BackupGCInterval Duration `json:"backupGCInterval"`
	// BackupOrphanAge is how old an archive without metadata (a failed or killed backup) must
	// be before the GC removes it. Default 1h.
	BackupOrphanAge Duration `json:"backupOrphanAge"`
	// SnapshotMaxFrozen is the longest a snapshot keeps a running sandbox frozen while it reads
	// its disk; a capture that needs longer is abandoned (the sandbox thawed) with 409
	// SNAPSHOT_FROZEN_TOO_LONG. Default 1m.
	SnapshotMaxFrozen Duration `json:"snapshotMaxFrozen"`
	// SleepSnapshotsKeep is how many snapshots taken at sleep (snapshotOnSleep) are kept per
	// sandbox, newest first; older ones are deleted as new ones are taken. Default 1.
	SleepSnapshotsKeep int `json:"sleepSnapshotsKeep"`
	// SnapshotQuotaBytes bounds the compressed bytes the snapshots of one sandbox may hold in
	// the blob store: past it its sleep snapshots are evicted, oldest first, then new
	// snapshots are refused with 507 SNAPSHOT_QUOTA_EXCEEDED. -1 turns it off. Default 20 GB.
	SnapshotQuotaBytes int `json:"snapshotQuotaBytes"`

	// DataVolume is the image file of the data volume (internal/volume): an ext4 file system,
	// loop-mounted at <StateDir>/data, that holds the sandboxes' disks, the snapshot layer cache
	// and the backup tree cache. "off" keeps them in StateDir's own file system (for a state dir
	// on a dedicated disk). Default <StateDir>/data.img.
	DataVolume string `json:"dataVolume"`
	// DataVolumeSize is the volume's size ("64G", "512M"; space reserved up front), used when
	// the image is created or to grow it; "auto" (the default) is 20% of the free space of the
	// state dir's file system at creation, between 2 GiB and 64 GiB (as LXD sizes its default
	// loop-backed pool).
	DataVolumeSize string `json:"dataVolumeSize"`
	// DiskQuota, on by default: each new sandbox's disk is a file system of its own, an image
	// of its instance type's disk size on the data volume, loop-mounted, so writes past the
	// size fail with ENOSPC inside the sandbox. Off (hosts without loop devices): new
	// sandboxes' disks are unlimited directories; sandboxes that have an image keep it.
	DiskQuota Switch `json:"diskQuota"`
	// SleepMemory, on by default: sleeps of sandboxes whose runtime can checkpoint (gVisor
	// with a recent runsc) keep their memory; off keeps the disk only (no memory images on the
	// data volume).
	SleepMemory Switch `json:"sleepMemory"`
	// UserNS, on by default: each new runc sandbox runs in a user namespace of its own, root
	// inside being an unprivileged host ID range of its own (65536 IDs from 2^20 up; see
	// docs/ARCHITECTURE.md, User namespaces). Existing sandboxes keep what they were created
	// with; gVisor sandboxes are unaffected (the Sentry has its own).
	UserNS Switch `json:"userns"`

	// ConsoleDir is the built web console (web/console/dist) served at /console/; "off" or
	// empty: the console page says it is off. Default <dir of hutchd>/../web/console/dist
	// when that exists (bin/hutchd in a built checkout), else empty.
	ConsoleDir string `json:"consoleDir"`
}

// Duration is a time.Duration that reads "5s" in JSON.
type Duration time.Duration

// UnmarshalJSON reads a Go duration string; null leaves the setting as it was (the default).
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// localCAs matches the host's locally added CA certificates, ExtraCACerts' default (a
// variable for tests).
var localCAs = "/usr/local/share/ca-certificates/*.crt"

// Defaults returns the built-in configuration: each setting's default (settings), and the
// defaults that depend on the host: hutch-init and the web console next to hutchd, and the
// host's locally added CAs.
func Defaults() Config {
	exe, _ := os.Executable()
	cas, _ := filepath.Glob(localCAs)
	sort.Strings(cas)
	var c Config
	for _, s := range settings {
		s.applyDefault(&c)
	}
	c.AgentBinary = filepath.Join(filepath.Dir(exe), "hutch-init")
	c.Upstreams = map[string]string{}
	c.ExtraCACerts = cas
	c.ConsoleDir = defaultConsoleDir(exe)
	return c
}

// Load builds the configuration from args (without the program name) and the environment
// lookup getenv: defaults, then the JSON file named by --config or HUTCH_CONFIG, then each
// setting's HUTCH_* variable, then its flag.
func Load(args []string, getenv func(string) string) (Config, error) {
	c := Defaults()
	fs := flag.NewFlagSet("hutchd", flag.ContinueOnError)
	cfgFile := fs.String("config", getenv("HUTCH_CONFIG"), "JSON config file")
	flags := make([]*flagValue, len(settings))
	for i, s := range settings {
		flags[i] = s.register(fs)
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "flags")
	}
	if *cfgFile != "" {
		b, err := os.ReadFile(*cfgFile)
		if err != nil {
			return Config{}, fmt.Errorf("config file: %w", err)
		}
		// A key the file misspells ("denyRange", "StateDir") is an error, not a setting
		// silently left at its default.
		if err := decodeFile(b, &c); err != nil {
			return Config{}, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "config file "+*cfgFile)
		}
		// Upstream names are lowercased, as the flag's and the variable's are; two that
		// differ only in case would leave one of them to chance.
		upstreams, err := lowerUpstreams(c.Upstreams)
		if err != nil {
			return Config{}, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "config file "+*cfgFile)
		}
		c.Upstreams = upstreams
	}
	for i, s := range settings {
		apply := s.fromEnvAndFlag
		if s.list != nil {
			apply = s.fromLists
		}
		if err := apply(&c, getenv, flags[i]); err != nil {
			return Config{}, err
		}
	}
	if c.ConsoleDir == "off" {
		c.ConsoleDir = ""
	}
	if c.ImagesDir == "" {
		c.ImagesDir = filepath.Join(c.StateDir, "images")
	}
	if c.BlobDir == "" {
		c.BlobDir = filepath.Join(c.StateDir, "blobs")
	}
	if c.DataVolume == "" {
		c.DataVolume = filepath.Join(c.StateDir, "data.img")
	}
	return c, c.Validate()
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !filepath.IsAbs(c.StateDir) {
		bad("state dir %q must be an absolute path", c.StateDir)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen address %q: %v", c.Listen, err)
	}
	p, err := netip.ParsePrefix(c.Subnet)
	if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
		bad("subnet %q must be an IPv4 prefix of /28 or larger", c.Subnet)
	}
	if c.IfPrefix == "" || len(c.IfPrefix) > 8 {
		bad("interface prefix %q must be 1-8 characters", c.IfPrefix)
	}
	if c.Runtime != "runc" && c.Runtime != "gvisor" {
		bad("runtime %q: want runc or gvisor", c.Runtime)
	}
	if c.RunscPlatform != "systrap" && c.RunscPlatform != "ptrace" && c.RunscPlatform != "kvm" {
		bad("runsc platform %q: want systrap, ptrace or kvm", c.RunscPlatform)
	}
	if c.NSPrefix == "" || c.NftTable == "" || c.CgroupParent == "" {
		bad("netns prefix, nft table and cgroup parent must be set")
	}
	for _, port := range []int{c.DNSPort, c.HTTPPort, c.TLSPort} {
		if port <= 0 || port > 65535 {
			bad("egress port %d out of range", port)
		}
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"stop grace", c.StopGrace}, {"process retention", c.ProcessRetention}, {"backup GC interval", c.BackupGCInterval},
		{"backup orphan age", c.BackupOrphanAge}, {"snapshot max frozen", c.SnapshotMaxFrozen}} {
		if d.v < 0 {
			bad("%s %v must not be negative", d.name, time.Duration(d.v))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Upstreams)) {
		addr := c.Upstreams[name]
		if err := checkUpstreamName(name); err != nil {
			bad("upstream %q=%q: %v", name, addr, err)
		} else if _, err := netip.ParseAddrPort(addr); err != nil {
			bad("upstream %q=%q: want name=ip:port", name, addr)
		}
	}
	for _, r := range c.DenyRanges {
		if _, err := netip.ParsePrefix(r); err != nil {
			bad("deny range %q: %v", r, err)
		}
	}
	if c.DataVolume != "off" && c.DataVolume != "" && !filepath.IsAbs(c.DataVolume) {
		bad("data volume %q must be an absolute path or \"off\"", c.DataVolume)
	}
	if c.DataVolumeSize != "auto" && c.DataVolumeSize != "" {
		if _, err := datavol.ParseSize(c.DataVolumeSize); err != nil {
			bad("data volume size %q: %v (or \"auto\")", c.DataVolumeSize, err)
		}
	}
	if c.PreviewListen != "off" {
		if _, _, err := net.SplitHostPort(c.PreviewListen); err != nil {
			bad("preview listen address %q: %v (or \"off\")", c.PreviewListen, err)
		}
	}
	if c.PreviewDomain == "" || strings.ContainsAny(c.PreviewDomain, "/: ") {
		bad("preview domain %q must be a DNS name", c.PreviewDomain)
	}
	if (c.PreviewTLSCert == "") != (c.PreviewTLSKey == "") {
		bad("preview TLS needs both a certificate and a key file")
	}
	if c.PreviewPublicPort < 0 || c.PreviewPublicPort > 65535 {
		bad("preview public port %d out of range", c.PreviewPublicPort)
	}
	if c.APIRateLimit < -1 || c.APIRateLimit == 0 {
		bad("API rate limit %d: want requests per second (at least 1) or -1 for off", c.APIRateLimit)
	}
	if c.MaxUploadBytes < 0 || c.PreviewMaxBodyBytes < 0 {
		bad("max upload bytes %d and preview max body bytes %d must be positive (or 0 for the default)", c.MaxUploadBytes, c.PreviewMaxBodyBytes)
	}
	if c.MaxConns < 0 {
		bad("max conns %d: want connections (at least 1) or 0 for the default", c.MaxConns)
	}
	if c.MaxConnsPerClient < -1 || c.MaxConnsPerClient == 0 {
		bad("max conns per client %d: want connections (at least 1) or -1 for off", c.MaxConnsPerClient)
	}
	if c.ProcessLogBytes < 64<<10 || c.ProcessLogBytes > 256<<20 {
		bad("process log bytes %d must be between 64 KiB and 256 MiB", c.ProcessLogBytes)
	}
	for _, b := range []struct {
		name       string
		size, keep int
	}{{"log", c.LogMaxBytes, c.LogFiles}, {"audit log", c.AuditLogMaxBytes, c.AuditLogFiles}, {"egress log", c.EgressLogMaxBytes, c.EgressLogFiles}} {
		if b.size < 64<<10 || b.keep < 1 || b.keep > 100 {
			bad("%s max bytes %d and files %d: want at least 64 KiB, and 1 to 100 files", b.name, b.size, b.keep)
		}
	}
	if c.LogFile != "" && !filepath.IsAbs(c.LogFile) {
		bad("log file %q must be an absolute path", c.LogFile)
	}
	if c.LogValueMaxBytes < 64 {
		bad("log value max bytes %d must be at least 64", c.LogValueMaxBytes)
	}
	if c.LogSandboxRate < -1 || c.LogSandboxRate == 0 {
		bad("log sandbox rate %d: want lines per second (at least 1) or -1 for off", c.LogSandboxRate)
	}
	if c.ProcessRetention < Duration(time.Second) {
		bad("process retention %s must be at least 1s", time.Duration(c.ProcessRetention))
	}
	switch c.BlobStore {
	case "local":
		if !filepath.IsAbs(c.BlobDir) {
			bad("blob dir %q must be an absolute path", c.BlobDir)
		}
	case "s3":
		if c.S3Endpoint == "" || c.S3Bucket == "" {
			bad("blob store s3 needs s3Endpoint and s3Bucket")
		}
	default:
		bad("blob store %q: want \"local\" or \"s3\"", c.BlobStore)
	}
	if c.BackupGCInterval < Duration(time.Second) || c.BackupOrphanAge < Duration(time.Second) {
		bad("backup GC interval and orphan age must be at least 1s")
	}
	if c.SnapshotMaxFrozen < Duration(time.Second) {
		bad("snapshot max frozen %s must be at least 1s", time.Duration(c.SnapshotMaxFrozen))
	}
	if c.SleepSnapshotsKeep < 1 {
		bad("sleep snapshots keep %d must be at least 1", c.SleepSnapshotsKeep)
	}
	if c.SnapshotQuotaBytes < 1 && c.SnapshotQuotaBytes != -1 {
		bad("snapshot quota bytes %d: want bytes (at least 1) or -1 for off", c.SnapshotQuotaBytes)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		bad("log level %q: %v", c.LogLevel, err)
	}
	if err := errors.Join(errs...); err != nil {
		return errdefs.Wrap(errdefs.CodeInvalidArgument, err, "config")
	}
	return nil
}

// SlogLevel returns the parsed log level.
func (c Config) SlogLevel() slog.Level {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	return lvl
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// DenyPrefixes returns DenyRanges parsed (Validate has checked them).
func (c Config) DenyPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range c.DenyRanges {
		if p, err := netip.ParsePrefix(r); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// defaultConsoleDir is <dir of exe>/../web/console/dist if it is a directory, else "".
func defaultConsoleDir(exe string) string {
	if exe == "" {
		return ""
	}
	d := filepath.Join(filepath.Dir(exe), "..", "web", "console", "dist")
	if fi, err := os.Stat(d); err == nil && fi.IsDir() {
		return d
	}
	return ""
}

// lowerUpstreams is the config file's upstreams with their names lowercased. Two names that
// differ only in case are an error naming both (in sorted order, every such pair).
func lowerUpstreams(in map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(in))
	given := map[string][]string{}
	for name, addr := range in {
		low := asciiLower(name)
		out[low] = addr
		given[low] = append(given[low], name)
	}
	var errs []error
	for _, low := range slices.Sorted(maps.Keys(given)) {
		if names := given[low]; len(names) > 1 {
			slices.Sort(names)
			errs = append(errs, fmt.Errorf("upstreams %s name the same host %q (names are case-insensitive)", quoteAll(names), low))
		}
	}
	return out, errors.Join(errs...)
}

// asciiLower is s with A-Z lowercased and nothing else changed: strings.ToLower would also
// fold characters such as the Kelvin sign (U+212A) to ASCII letters, so a name the grammar
// refuses would pass as another.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// numericLabel reports whether label is a number as a resolver reads an IPv4 address's
// parts: decimal digits, or 0x and hex digits ("127.1", "2130706433" and "0x7f000001" are
// addresses to inet_aton and to browsers).
func numericLabel(label string) bool {
	digits := label
	if len(label) > 2 && (label[:2] == "0x" || label[:2] == "0X") {
		digits = label[2:]
		for _, r := range digits {
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
		return true
	}
	if digits == "" {
		return false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// quoteAll is names quoted, joined by ", " and a final " and ".
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// checkUpstreamName checks an upstream's name (lowercased): a DNS host name of at most 253
// characters, labels of 1 to 63 characters separated by dots, each of a-z, 0-9, "-" and "_",
// neither starting nor ending with "-"; no trailing dot, not an IP address, and not ending
// in a numeric label, which resolvers read as IPv4 ("127.1"; sandboxes reach upstreams by
// name).
func checkUpstreamName(name string) error {
	const want = "want a host name: dot-separated labels of a-z, 0-9, - and _"
	if name == "" || len(name) > 253 {
		return fmt.Errorf("name of %d characters: %s, at most 253 characters", len(name), want)
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return fmt.Errorf("name is an IP address: %s", want)
	}
	if labels := strings.Split(name, "."); numericLabel(labels[len(labels)-1]) {
		return fmt.Errorf("name %q ends in a number, which resolvers read as an IPv4 address: %s", name, want)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q: %s, each 1-63 characters, not starting or ending with -", label, want)
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' {
				return fmt.Errorf("character %q: %s", r, want)
			}
		}
	}
	return nil
}
