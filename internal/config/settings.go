package config

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/webhook"
)

// setting describes one configuration setting: the Config field, its JSON key (the field's
// json tag), command-line flag, HUTCH_* environment variable, default and the flag's help. Load
// and Defaults are driven by the settings table, so a new setting is one entry here plus its
// field.
type setting struct {
	// field returns a pointer to the setting's field of c: *string, *int, *bool, *Duration,
	// *Switch, or, for list settings (list set), any.
	field func(c *Config) any
	json  string
	flag  string
	env   string
	// def is the built-in default (of the field's type); nil: the zero value, or computed by
	// Defaults.
	def   any
	usage string
	// list, for settings given as repeatable flags and comma-separated env values, applies
	// the env items, then the flags' (each source read in that order), to c.
	list func(c *Config, items []string) error
}

// settings are hutchd's configuration settings. Their flags and variables use the
// conventions of docs/ARCHITECTURE.md "Configuration": a string, number or duration flag that is empty or 0
// leaves the setting as it is; "on"/"off" settings are Switch.
var settings = []setting{
	{field: func(c *Config) any { return &c.StateDir }, json: "stateDir", flag: "state-dir", env: "HUTCH_STATE_DIR", def: "/var/lib/hutch",
		usage: "state directory (env HUTCH_STATE_DIR; default /var/lib/hutch)"},
	{field: func(c *Config) any { return &c.Listen }, json: "listen", flag: "listen", env: "HUTCH_LISTEN", def: "127.0.0.1:7411",
		usage: "API listen address (env HUTCH_LISTEN; default 127.0.0.1:7411)"},
	{field: func(c *Config) any { return &c.TokenHashFile }, json: "tokenHashFile", flag: "token-hash-file", env: "HUTCH_TOKEN_HASH_FILE",
		usage: "file with the API token's SHA-256 (sha256:<hex>, from 'hutch token hash'): hash-only mode, no <state-dir>/token (env HUTCH_TOKEN_HASH_FILE)"},
	{field: func(c *Config) any { return &c.ImagesDir }, json: "imagesDir", flag: "images-dir", env: "HUTCH_IMAGES_DIR",
		usage: "image directory (env HUTCH_IMAGES_DIR; default <state-dir>/images)"},
	{field: func(c *Config) any { return &c.AgentBinary }, json: "agentBinary", flag: "agent-binary", env: "HUTCH_AGENT_BINARY",
		usage: "hutch-init binary (env HUTCH_AGENT_BINARY)"},
	{field: func(c *Config) any { return &c.RuncBinary }, json: "runcBinary", flag: "runc", env: "HUTCH_RUNC", def: "runc",
		usage: "runc binary (env HUTCH_RUNC)"},
	{field: func(c *Config) any { return &c.Runtime }, json: "runtime", flag: "runtime", env: "HUTCH_RUNTIME", def: "runc",
		usage: `isolation runtime of sandboxes created without one: "runc" or "gvisor" (env HUTCH_RUNTIME; default runc)`},
	{field: func(c *Config) any { return &c.RunscBinary }, json: "runscBinary", flag: "runsc", env: "HUTCH_RUNSC", def: "runsc",
		usage: "gVisor runsc binary (env HUTCH_RUNSC; default runsc)"},
	{field: func(c *Config) any { return &c.RunscPlatform }, json: "runscPlatform", flag: "runsc-platform", env: "HUTCH_RUNSC_PLATFORM", def: "systrap",
		usage: `gVisor platform, "systrap", "ptrace" or "kvm" (env HUTCH_RUNSC_PLATFORM; default systrap)`},
	{field: func(c *Config) any { return &c.Subnet }, json: "subnet", flag: "subnet", env: "HUTCH_SUBNET", def: "10.88.0.0/16",
		usage: "sandbox subnet (env HUTCH_SUBNET)"},
	{field: func(c *Config) any { return &c.IfPrefix }, json: "ifPrefix", flag: "if-prefix", env: "HUTCH_IF_PREFIX", def: "hsb",
		usage: "host veth name prefix (env HUTCH_IF_PREFIX)"},
	{field: func(c *Config) any { return &c.NSPrefix }, json: "nsPrefix", flag: "netns-prefix", env: "HUTCH_NETNS_PREFIX", def: "hutch-",
		usage: "network namespace name prefix (env HUTCH_NETNS_PREFIX)"},
	{field: func(c *Config) any { return &c.CgroupParent }, json: "cgroupParent", flag: "cgroup-parent", env: "HUTCH_CGROUP_PARENT", def: "hutch",
		usage: "cgroup holding the sandboxes' cgroups (env HUTCH_CGROUP_PARENT)"},
	{field: func(c *Config) any { return &c.NftTable }, json: "nftTable", flag: "nft-table", env: "HUTCH_NFT_TABLE", def: "hutch",
		usage: "nftables table name (env HUTCH_NFT_TABLE)"},
	{field: func(c *Config) any { return &c.DNSPort }, json: "dnsPort", flag: "dns-port", env: "HUTCH_DNS_PORT", def: 15053,
		usage: "egress DNS port (env HUTCH_DNS_PORT)"},
	{field: func(c *Config) any { return &c.HTTPPort }, json: "httpPort", flag: "http-port", env: "HUTCH_HTTP_PORT", def: 15001,
		usage: "egress HTTP proxy port (env HUTCH_HTTP_PORT)"},
	{field: func(c *Config) any { return &c.TLSPort }, json: "tlsPort", flag: "tls-port", env: "HUTCH_TLS_PORT", def: 15002,
		usage: "egress TLS proxy port (env HUTCH_TLS_PORT)"},
	{field: func(c *Config) any { return &c.Upstreams }, json: "upstreams", flag: "upstream", env: "HUTCH_UPSTREAMS", list: addUpstreams,
		usage: "operator-approved destination name=ip:port, repeatable (env HUTCH_UPSTREAMS, comma-separated)"},
	{field: func(c *Config) any { return &c.DenyRanges }, json: "denyRanges", flag: "deny-range", env: "HUTCH_DENY_RANGES", list: addDenyRanges,
		usage: "CIDR range sandboxes may never reach, repeatable (env HUTCH_DENY_RANGES, comma-separated)"},
	{field: func(c *Config) any { return &c.ExtraCACerts }, json: "extraCACerts", flag: "extra-ca", env: "HUTCH_EXTRA_CA",
		list:  func(c *Config, items []string) error { c.ExtraCACerts = items; return nil },
		usage: "PEM file trusted inside sandboxes, repeatable (env HUTCH_EXTRA_CA, comma-separated)"},
	{field: func(c *Config) any { return &c.EgressRootCAs }, json: "egressRootCAs", flag: "egress-root-ca", env: "HUTCH_EGRESS_ROOT_CA",
		list:  func(c *Config, items []string) error { c.EgressRootCAs = items; return nil },
		usage: "PEM file trusted for upstreams of intercepted hosts besides the system roots, repeatable (env HUTCH_EGRESS_ROOT_CA, comma-separated)"},
	{field: func(c *Config) any { return &c.EgressDNS }, json: "egressDNS", flag: "egress-dns", env: "HUTCH_EGRESS_DNS",
		list:  func(c *Config, items []string) error { c.EgressDNS = items; return nil },
		usage: "DNS server ip:port for sandbox destinations, repeatable (env HUTCH_EGRESS_DNS, comma-separated; default the host's resolver)"},
	{field: func(c *Config) any { return &c.EgressHandlers }, json: "egressHandlers", flag: "egress-handler", env: "HUTCH_EGRESS_HANDLERS", list: addEgressHandlers,
		usage: "operator handler NAME=SIGNING_SECRET@URL (URL http(s)://… or unix:/path.sock), repeatable (env HUTCH_EGRESS_HANDLERS, comma-separated)"},
	{field: func(c *Config) any { return &c.PreviewListen }, json: "previewListen", flag: "preview-listen", env: "HUTCH_PREVIEW_LISTEN", def: "127.0.0.1:7412",
		usage: `preview listener address, "off" to disable (env HUTCH_PREVIEW_LISTEN; default 127.0.0.1:7412)`},
	{field: func(c *Config) any { return &c.PreviewDomain }, json: "previewDomain", flag: "preview-domain", env: "HUTCH_PREVIEW_DOMAIN", def: "localhost",
		usage: "domain of preview URLs (env HUTCH_PREVIEW_DOMAIN; default localhost)"},
	{field: func(c *Config) any { return &c.PreviewTLSCert }, json: "previewTLSCert", flag: "preview-tls-cert", env: "HUTCH_PREVIEW_TLS_CERT",
		usage: "PEM certificate for the preview listener (env HUTCH_PREVIEW_TLS_CERT)"},
	{field: func(c *Config) any { return &c.PreviewTLSKey }, json: "previewTLSKey", flag: "preview-tls-key", env: "HUTCH_PREVIEW_TLS_KEY",
		usage: "PEM key for the preview listener (env HUTCH_PREVIEW_TLS_KEY)"},
	{field: func(c *Config) any { return &c.PreviewPublicPort }, json: "previewPublicPort", flag: "preview-public-port", env: "HUTCH_PREVIEW_PUBLIC_PORT",
		usage: "port written into preview URLs (env HUTCH_PREVIEW_PUBLIC_PORT)"},
	{field: func(c *Config) any { return &c.APIRateLimit }, json: "apiRateLimit", flag: "api-rate-limit", env: "HUTCH_API_RATE_LIMIT", def: 1000,
		usage: "API requests per second per client address, bursts of 5x; -1 off (env HUTCH_API_RATE_LIMIT; default 1000)"},
	{field: func(c *Config) any { return &c.MaxUploadBytes }, json: "maxUploadBytes", flag: "max-upload-bytes", env: "HUTCH_MAX_UPLOAD_BYTES",
		usage: "largest file upload (PUT .../files) in bytes (env HUTCH_MAX_UPLOAD_BYTES; default 20 GB)"},
	{field: func(c *Config) any { return &c.PreviewMaxBodyBytes }, json: "previewMaxBodyBytes", flag: "preview-max-body-bytes", env: "HUTCH_PREVIEW_MAX_BODY_BYTES",
		usage: "largest request body through a preview URL in bytes (env HUTCH_PREVIEW_MAX_BODY_BYTES; default 1 GiB)"},
	{field: func(c *Config) any { return &c.MaxConns }, json: "maxConns", flag: "max-conns", env: "HUTCH_MAX_CONNS",
		usage: "client connections open at once on the API listener, and on the preview listener (env HUTCH_MAX_CONNS; default 10000 or RLIMIT_NOFILE/8)"},
	{field: func(c *Config) any { return &c.MaxConnsPerClient }, json: "maxConnsPerClient", flag: "max-conns-per-client", env: "HUTCH_MAX_CONNS_PER_CLIENT", def: DefaultMaxConnsPerClient,
		usage: "connections one client address may hold open before presenting a valid token, per listener; -1 off (env HUTCH_MAX_CONNS_PER_CLIENT; default 256)"},
	{field: func(c *Config) any { return &c.ProcessLogBytes }, json: "processLogBytes", flag: "process-log-bytes", env: "HUTCH_PROCESS_LOG_BYTES", def: 4 << 20,
		usage: "per-stream log buffer of background processes (env HUTCH_PROCESS_LOG_BYTES; default 4 MiB)"},
	{field: func(c *Config) any { return &c.ProcessRetention }, json: "processRetention", flag: "process-retention", env: "HUTCH_PROCESS_RETENTION", def: Duration(time.Hour),
		usage: "how long finished processes are kept (env HUTCH_PROCESS_RETENTION; default 1h)"},
	{field: func(c *Config) any { return &c.StopGrace }, json: "stopGrace", flag: "stop-grace", env: "HUTCH_STOP_GRACE", def: Duration(5 * time.Second),
		usage: "how long a sandbox's processes get after SIGTERM before SIGKILL (env HUTCH_STOP_GRACE; default 5s)"},
	{field: func(c *Config) any { return &c.LogLevel }, json: "logLevel", flag: "log-level", env: "HUTCH_LOG_LEVEL", def: "info",
		usage: "debug|info|warn|error (env HUTCH_LOG_LEVEL)"},
	{field: func(c *Config) any { return &c.LogFile }, json: "logFile", flag: "log-file", env: "HUTCH_LOG_FILE",
		usage: "file hutchd logs to, rotated (env HUTCH_LOG_FILE; default standard error)"},
	{field: func(c *Config) any { return &c.LogMaxBytes }, json: "logMaxBytes", flag: "log-max-bytes", env: "HUTCH_LOG_MAX_BYTES", def: 16 << 20,
		usage: "size at which --log-file is rotated (env HUTCH_LOG_MAX_BYTES; default 16 MiB)"},
	{field: func(c *Config) any { return &c.LogFiles }, json: "logFiles", flag: "log-files", env: "HUTCH_LOG_FILES", def: 3,
		usage: "rotated log files kept (env HUTCH_LOG_FILES; default 3)"},
	{field: func(c *Config) any { return &c.LogValueMaxBytes }, json: "logValueMaxBytes", flag: "log-value-max-bytes", env: "HUTCH_LOG_VALUE_MAX_BYTES", def: 1 << 10,
		usage: "longest message or value in a log line, longer ones are cut (env HUTCH_LOG_VALUE_MAX_BYTES; default 1024)"},
	{field: func(c *Config) any { return &c.LogSandboxRate }, json: "logSandboxRate", flag: "log-sandbox-rate", env: "HUTCH_LOG_SANDBOX_RATE", def: 5,
		usage: "log lines per second and level one sandbox may cause, bursts of 10x, the rest counted; -1 off (env HUTCH_LOG_SANDBOX_RATE; default 5)"},
	{field: func(c *Config) any { return &c.AuditLogMaxBytes }, json: "auditLogMaxBytes", flag: "audit-log-max-bytes", env: "HUTCH_AUDIT_LOG_MAX_BYTES", def: 16 << 20,
		usage: "size at which <state-dir>/audit.log is rotated (env HUTCH_AUDIT_LOG_MAX_BYTES; default 16 MiB)"},
	{field: func(c *Config) any { return &c.AuditLogFiles }, json: "auditLogFiles", flag: "audit-log-files", env: "HUTCH_AUDIT_LOG_FILES", def: 3,
		usage: "rotated audit log files kept (env HUTCH_AUDIT_LOG_FILES; default 3)"},
	{field: func(c *Config) any { return &c.EgressLogMaxBytes }, json: "egressLogMaxBytes", flag: "egress-log-max-bytes", env: "HUTCH_EGRESS_LOG_MAX_BYTES", def: 8 << 20,
		usage: "size at which a sandbox's egress.jsonl is rotated (env HUTCH_EGRESS_LOG_MAX_BYTES; default 8 MiB)"},
	{field: func(c *Config) any { return &c.EgressLogFiles }, json: "egressLogFiles", flag: "egress-log-files", env: "HUTCH_EGRESS_LOG_FILES", def: 2,
		usage: "rotated egress event files kept per sandbox (env HUTCH_EGRESS_LOG_FILES; default 2)"},
	{field: func(c *Config) any { return &c.BlobStore }, json: "blobStore", flag: "blob-store", env: "HUTCH_BLOB_STORE", def: "local",
		usage: `backup storage, "local" or "s3" (env HUTCH_BLOB_STORE; default local)`},
	{field: func(c *Config) any { return &c.BlobDir }, json: "blobDir", flag: "blob-dir", env: "HUTCH_BLOB_DIR",
		usage: "local blob store directory (env HUTCH_BLOB_DIR; default <state-dir>/blobs)"},
	{field: func(c *Config) any { return &c.S3Endpoint }, json: "s3Endpoint", flag: "s3-endpoint", env: "HUTCH_S3_ENDPOINT",
		usage: "S3 endpoint host[:port] (env HUTCH_S3_ENDPOINT)"},
	{field: func(c *Config) any { return &c.S3Bucket }, json: "s3Bucket", flag: "s3-bucket", env: "HUTCH_S3_BUCKET",
		usage: "S3 bucket (env HUTCH_S3_BUCKET)"},
	{field: func(c *Config) any { return &c.S3Region }, json: "s3Region", flag: "s3-region", env: "HUTCH_S3_REGION",
		usage: "S3 region (env HUTCH_S3_REGION; default us-east-1)"},
	{field: func(c *Config) any { return &c.S3AccessKey }, json: "s3AccessKey", flag: "s3-access-key", env: "HUTCH_S3_ACCESS_KEY",
		usage: "S3 access key (env HUTCH_S3_ACCESS_KEY)"},
	{field: func(c *Config) any { return &c.S3SecretKey }, json: "s3SecretKey", flag: "s3-secret-key", env: "HUTCH_S3_SECRET_KEY",
		usage: "S3 secret key (env HUTCH_S3_SECRET_KEY; visible in ps: prefer the env)"},
	{field: func(c *Config) any { return &c.S3Prefix }, json: "s3Prefix", flag: "s3-prefix", env: "HUTCH_S3_PREFIX",
		usage: "key prefix in the S3 bucket (env HUTCH_S3_PREFIX)"},
	{field: func(c *Config) any { return &c.S3TLS }, json: "s3TLS", flag: "s3-tls", env: "HUTCH_S3_TLS",
		usage: "use https to the S3 endpoint (env HUTCH_S3_TLS=true)"},
	{field: func(c *Config) any { return &c.BackupGCInterval }, json: "backupGCInterval", flag: "backup-gc-interval", env: "HUTCH_BACKUP_GC_INTERVAL", def: Duration(10 * time.Minute),
		usage: "how often expired backups are removed (env HUTCH_BACKUP_GC_INTERVAL; default 10m)"},
	{field: func(c *Config) any { return &c.BackupOrphanAge }, json: "backupOrphanAge", flag: "backup-orphan-age", env: "HUTCH_BACKUP_ORPHAN_AGE", def: Duration(time.Hour),
		usage: "age before an archive without metadata is removed (env HUTCH_BACKUP_ORPHAN_AGE; default 1h)"},
	{field: func(c *Config) any { return &c.SnapshotMaxFrozen }, json: "snapshotMaxFrozen", flag: "snapshot-max-frozen", env: "HUTCH_SNAPSHOT_MAX_FROZEN", def: Duration(time.Minute),
		usage: "longest a snapshot keeps a running sandbox frozen (env HUTCH_SNAPSHOT_MAX_FROZEN; default 1m)"},
	{field: func(c *Config) any { return &c.SleepSnapshotsKeep }, json: "sleepSnapshotsKeep", flag: "sleep-snapshots-keep", env: "HUTCH_SLEEP_SNAPSHOTS_KEEP", def: 1,
		usage: "snapshots taken at sleep kept per sandbox (env HUTCH_SLEEP_SNAPSHOTS_KEEP; default 1)"},
	{field: func(c *Config) any { return &c.SnapshotQuotaBytes }, json: "snapshotQuotaBytes", flag: "snapshot-quota-bytes", env: "HUTCH_SNAPSHOT_QUOTA_BYTES", def: 20_000_000_000,
		usage: "blob store bytes the snapshots of one sandbox may hold, -1 off (env HUTCH_SNAPSHOT_QUOTA_BYTES; default 20 GB)"},
	{field: func(c *Config) any { return &c.DataVolume }, json: "dataVolume", flag: "data-volume", env: "HUTCH_DATA_VOLUME",
		usage: `data volume image, "off" to keep data in the state dir (env HUTCH_DATA_VOLUME; default <state-dir>/data.img)`},
	{field: func(c *Config) any { return &c.DataVolumeSize }, json: "dataVolumeSize", flag: "data-volume-size", env: "HUTCH_DATA_VOLUME_SIZE", def: "auto",
		usage: `data volume size, e.g. 64G, or "auto" (env HUTCH_DATA_VOLUME_SIZE; default auto)`},
	{field: func(c *Config) any { return &c.DiskQuota }, json: "diskQuota", flag: "disk-quota", env: "HUTCH_DISK_QUOTA", def: Switch(true),
		usage: `per-sandbox disk size limit, "on" or "off" (env HUTCH_DISK_QUOTA; default on; off for hosts without loop devices)`},
	{field: func(c *Config) any { return &c.SleepMemory }, json: "sleepMemory", flag: "sleep-memory", env: "HUTCH_SLEEP_MEMORY", def: Switch(true),
		usage: `keep running processes across sleeps where the runtime can checkpoint (gVisor), "on" or "off" (env HUTCH_SLEEP_MEMORY; default on)`},
	{field: func(c *Config) any { return &c.UserNS }, json: "userns", flag: "userns", env: "HUTCH_USERNS", def: Switch(true),
		usage: `user namespace per new runc sandbox, "on" or "off" (env HUTCH_USERNS; default on)`},
	{field: func(c *Config) any { return &c.ConsoleDir }, json: "consoleDir", flag: "console-dir", env: "HUTCH_CONSOLE_DIR",
		usage: `built web console directory, "off" to disable (env HUTCH_CONSOLE_DIR; default <hutchd dir>/../web/console/dist if present)`},
}

// Switch is a setting that is on or off. Users write it "on" or "off" on the command line, in
// HUTCH_* variables and in config files; a config file may also say true or false.
type Switch bool

// parseSwitch reads "on" or "off".
func parseSwitch(v string) (Switch, error) {
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("%q: want \"on\" or \"off\"", v)
}

// UnmarshalJSON reads "on", "off", true or false.
func (s *Switch) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		// null leaves the setting as it was (the default), as before it was a Switch.
		return nil
	case bool:
		*s = Switch(v)
		return nil
	case string:
		p, err := parseSwitch(v)
		if err != nil {
			return err
		}
		*s = p
		return nil
	}
	return fmt.Errorf("%s: want \"on\" or \"off\"", b)
}

// MarshalJSON writes "on" or "off".
func (s Switch) MarshalJSON() ([]byte, error) {
	if s {
		return []byte(`"on"`), nil
	}
	return []byte(`"off"`), nil
}

// applyDefault sets s's field of c to its default.
func (s setting) applyDefault(c *Config) {
	if s.def == nil {
		return
	}
	switch p := s.field(c).(type) {
	case *string:
		*p = s.def.(string)
	case *int:
		*p = s.def.(int)
	case *Duration:
		*p = s.def.(Duration)
	case *Switch:
		*p = s.def.(Switch)
	case *bool:
		*p = s.def.(bool)
	default:
		panic("config: no default for the type of " + s.json)
	}
}

// flagValue is a registered flag's parsed value, read once the flags are parsed.
type flagValue struct {
	s     setting
	str   *string
	num   *int
	dur   *time.Duration
	yes   *bool
	items *listFlag
}

// register defines s's flag on fs with the flag package's type for the field, so -h shows
// "string", "int" or "duration" as before. Every flag's zero value means "not given".
func (s setting) register(fs *flag.FlagSet) *flagValue {
	v := &flagValue{s: s}
	if s.list != nil {
		v.items = &listFlag{}
		fs.Var(v.items, s.flag, s.usage)
		return v
	}
	switch s.field(&Config{}).(type) {
	case *string, *Switch:
		v.str = fs.String(s.flag, "", s.usage)
	case *int:
		v.num = fs.Int(s.flag, 0, s.usage)
	case *Duration:
		v.dur = fs.Duration(s.flag, 0, s.usage)
	case *bool:
		v.yes = fs.Bool(s.flag, false, s.usage)
	default:
		panic("config: no flag for the type of " + s.json)
	}
	return v
}

// fromEnvAndFlag applies s's environment variable (looked up by getenv), then its flag f, to
// c. List settings are applied by fromLists.
func (s setting) fromEnvAndFlag(c *Config, getenv func(string) string, f *flagValue) error {
	ev := getenv(s.env)
	switch p := s.field(c).(type) {
	case *string:
		if ev != "" {
			*p = ev
		}
		if *f.str != "" {
			*p = *f.str
		}
	case *Switch:
		if ev != "" {
			v, err := parseSwitch(ev)
			if err != nil {
				return errdefs.Newf(errdefs.CodeInvalidArgument, "%s=%v", s.env, err)
			}
			*p = v
		}
		if *f.str != "" {
			v, err := parseSwitch(*f.str)
			if err != nil {
				return errdefs.Newf(errdefs.CodeInvalidArgument, "--%s %v", s.flag, err)
			}
			*p = v
		}
	case *int:
		if ev != "" {
			n, err := strconv.Atoi(ev)
			if err != nil {
				return errdefs.Newf(errdefs.CodeInvalidArgument, "%s=%q is not a number", s.env, ev)
			}
			*p = n
		}
		if *f.num != 0 {
			*p = *f.num
		}
	case *Duration:
		if ev != "" {
			d, err := time.ParseDuration(ev)
			if err != nil {
				return errdefs.Newf(errdefs.CodeInvalidArgument, "%s=%q is not a duration", s.env, ev)
			}
			*p = Duration(d)
		}
		if *f.dur != 0 {
			*p = Duration(*f.dur)
		}
	case *bool:
		if ev != "" {
			b, err := strconv.ParseBool(ev)
			if err != nil {
				return errdefs.Newf(errdefs.CodeInvalidArgument, "%s=%q is not a boolean", s.env, ev)
			}
			*p = b
		}
		if *f.yes {
			*p = true
		}
	}
	return nil
}

// fromLists applies a list setting: the env's comma-separated items, then the flags'.
func (s setting) fromLists(c *Config, getenv func(string) string, f *flagValue) error {
	items := []string(*f.items)
	if v := getenv(s.env); v != "" {
		items = append(strings.Split(v, ","), items...)
	}
	if len(items) == 0 {
		return nil
	}
	return s.list(c, items)
}

// addUpstreams adds name=ip:port items to c.Upstreams (names lowercased, ASCII only). A name
// given twice among the items, in any case, is an error: one of the two would win silently.
func addUpstreams(c *Config, items []string) error {
	given := map[string]string{}
	for _, u := range items {
		name, addr, ok := strings.Cut(strings.TrimSpace(u), "=")
		if !ok {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "upstream %q: want name=ip:port", u)
		}
		low := asciiLower(name)
		if first, dup := given[low]; dup {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "upstreams %q and %q name the same host %q (names are case-insensitive)", first, name, low)
		}
		given[low] = name
		c.Upstreams[low] = addr
	}
	return nil
}

// addDenyRanges appends CIDR items to c.DenyRanges (those of the config file stay).
func addDenyRanges(c *Config, items []string) error {
	for _, d := range items {
		c.DenyRanges = append(c.DenyRanges, strings.TrimSpace(d))
	}
	return nil
}

// addEgressHandlers adds NAME=SIGNING_SECRET@URL items to c.EgressHandlers.
func addEgressHandlers(c *Config, items []string) error {
	for _, h := range items {
		name, rest, ok1 := strings.Cut(strings.TrimSpace(h), "=")
		sec, u, ok2 := strings.Cut(rest, "@")
		if !ok1 || !ok2 || name == "" {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "egress handler %q: want NAME=SIGNING_SECRET@URL", h)
		}
		if c.EgressHandlers == nil {
			c.EgressHandlers = map[string]webhook.Config{}
		}
		c.EgressHandlers[name] = webhook.Config{URL: u, SigningSecret: sec}
	}
	return nil
}
