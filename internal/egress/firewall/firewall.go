// Package firewall owns hutchd's nftables table (`inet hutch` by default): it redirects
// sandbox DNS, HTTP and HTTPS to hutchd's listeners and drops everything else a sandbox sends.
//
// The ruleset (see Ruleset for the exact text) matches only packets entering on sandbox
// interfaces ("<IfPrefix>*") and:
//   - drops IPv6, and any source that is not the sandbox registered on that interface
//     (the @sandboxes set of "ifname . address" pairs) — anti-spoofing;
//   - redirects UDP/TCP 53 to the DNS port, TCP 80 to the HTTP port, TCP 443 to the TLS port,
//     and, when OtherPort is set, every other TCP port to the other-port listener (which
//     refuses what the sandbox's policy does not allow);
//   - drops all other sandbox traffic (other TCP ports without OtherPort, other UDP, ICMP);
//   - in the input chain accepts from sandboxes only established flows and flows it
//     redirected itself (ct status dnat), so hutchd's API, sshd and any other host service —
//     and direct connections to the listener ports — are unreachable from sandboxes;
//   - drops the listener ports from every interface but loopback and sandboxes;
//   - drops forwarding in or out of sandbox interfaces (sandbox↔sandbox, and hosts where
//     something turned ip_forward on);
//   - rejects guarded dials (packets marked GuardMark by the proxy) to the static floor, a
//     kernel backstop for the proxy's own address check.
//
// The table is built with the nft CLI (`nft -f -`) in one atomic transaction; Apply deletes and
// re-adds it in the same batch, so a restart reconciles whatever a crash left. While hutchd is
// down the table stays and redirects to closed ports: egress fails closed.
package firewall

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/blocked"
)

// GuardMark is the SO_MARK the proxy sets on sandbox-driven dials; the output chain rejects
// marked packets to the floor ranges.
const GuardMark = 0x6875

// Config configures the table.
type Config struct {
	Table    string // nft table name (family inet), e.g. "hutch"
	IfPrefix string // sandbox host-side interface prefix, e.g. "hsb"
	DNSPort  int    // hutchd DNS listener (UDP+TCP)
	HTTPPort int    // hutchd HTTP proxy listener
	TLSPort  int    // hutchd TLS proxy listener
	// OtherPort is hutchd's listener for TCP to any other port; 0 drops such traffic.
	OtherPort int
}

// Sandbox is one element of the anti-spoofing set.
type Sandbox struct {
	HostIf string
	Addr   netip.Addr
}

// Firewall applies and edits the table. Methods are safe for concurrent use only in the sense
// that each nft invocation is atomic; callers serialise edits for the same sandbox.
type Firewall struct {
	cfg Config
	log *slog.Logger
}

var namePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,31}$`)

// New validates cfg (errdefs.ErrInvalidArgument) and checks that the nft binary exists
// (errdefs.ErrUnavailable).
func New(cfg Config, log *slog.Logger) (*Firewall, error) {
	if !namePattern.MatchString(cfg.Table) {
		return nil, fmt.Errorf("firewall: invalid table name %q: %w", cfg.Table, errdefs.ErrInvalidArgument)
	}
	if !namePattern.MatchString(cfg.IfPrefix) || len(cfg.IfPrefix) > 10 {
		return nil, fmt.Errorf("firewall: invalid interface prefix %q: %w", cfg.IfPrefix, errdefs.ErrInvalidArgument)
	}
	if cfg.OtherPort < 0 || cfg.OtherPort > 65535 {
		return nil, fmt.Errorf("firewall: invalid port %d: %w", cfg.OtherPort, errdefs.ErrInvalidArgument)
	}
	for _, p := range []int{cfg.DNSPort, cfg.HTTPPort, cfg.TLSPort} {
		if p <= 0 || p > 65535 {
			return nil, fmt.Errorf("firewall: invalid port %d: %w", p, errdefs.ErrInvalidArgument)
		}
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return nil, fmt.Errorf("firewall: nft not found: %w", errdefs.ErrUnavailable)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Firewall{cfg: cfg, log: log}, nil
}

// Apply replaces the table atomically with the full ruleset, with sandboxes as the initial
// anti-spoofing set.
func (f *Firewall) Apply(ctx context.Context, sandboxes []Sandbox) error {
	script := fmt.Sprintf("table inet %s\ndelete table inet %s\n%s", f.cfg.Table, f.cfg.Table, Ruleset(f.cfg, sandboxes))
	if err := nft(ctx, script); err != nil {
		return fmt.Errorf("firewall: apply table %s: %w", f.cfg.Table, err)
	}
	f.log.DebugContext(ctx, "egress firewall applied", "table", f.cfg.Table, "sandboxes", len(sandboxes))
	return nil
}

// Remove deletes the table; a missing table is not an error.
func (f *Firewall) Remove(ctx context.Context) error {
	script := fmt.Sprintf("table inet %s\ndelete table inet %s\n", f.cfg.Table, f.cfg.Table)
	if err := nft(ctx, script); err != nil {
		return fmt.Errorf("firewall: remove table %s: %w", f.cfg.Table, err)
	}
	return nil
}

// AddSandbox adds hostIf . addr to the anti-spoofing set (adding an existing element is a
// no-op). The table must have been applied.
func (f *Firewall) AddSandbox(ctx context.Context, s Sandbox) error {
	if err := checkSandbox(s); err != nil {
		return err
	}
	script := fmt.Sprintf("add element inet %s sandboxes { %s }\n", f.cfg.Table, element(s))
	if err := nft(ctx, script); err != nil {
		return fmt.Errorf("firewall: add sandbox %s: %w", s.HostIf, err)
	}
	return nil
}

// RemoveSandbox deletes hostIf . addr from the anti-spoofing set. The element must exist
// (nft 1.0.6 has no "destroy"); callers track what they added.
func (f *Firewall) RemoveSandbox(ctx context.Context, s Sandbox) error {
	if err := checkSandbox(s); err != nil {
		return err
	}
	script := fmt.Sprintf("delete element inet %s sandboxes { %s }\n", f.cfg.Table, element(s))
	if err := nft(ctx, script); err != nil {
		return fmt.Errorf("firewall: remove sandbox %s: %w", s.HostIf, err)
	}
	return nil
}

// Exists reports whether the table is present in the kernel.
func (f *Firewall) Exists(ctx context.Context) (bool, error) {
	out, err := exec.CommandContext(ctx, "nft", "list", "tables").Output()
	if err != nil {
		return false, fmt.Errorf("firewall: nft list tables: %w", err)
	}
	return slices.Contains(strings.Split(string(out), "\n"), "table inet "+f.cfg.Table), nil
}

var ifPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

func checkSandbox(s Sandbox) error {
	if !ifPattern.MatchString(s.HostIf) || !s.Addr.Is4() {
		return fmt.Errorf("firewall: invalid sandbox %q %s: %w", s.HostIf, s.Addr, errdefs.ErrInvalidArgument)
	}
	return nil
}

func element(s Sandbox) string { return fmt.Sprintf("%q . %s", s.HostIf, s.Addr) }

// Ruleset returns the table definition (without the delete preamble) for cfg and the given
// anti-spoofing elements. It is pure, for review and golden tests.
func Ruleset(cfg Config, sandboxes []Sandbox) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	sb := fmt.Sprintf("%q", cfg.IfPrefix+"*")
	ports := fmt.Sprintf("{ %d, %d, %d }", cfg.DNSPort, cfg.HTTPPort, cfg.TLSPort)
	if cfg.OtherPort != 0 {
		ports = fmt.Sprintf("{ %d, %d, %d, %d }", cfg.DNSPort, cfg.HTTPPort, cfg.TLSPort, cfg.OtherPort)
	}

	w("table inet %s {", cfg.Table)
	w("\tset sandboxes {")
	w("\t\ttype ifname . ipv4_addr")
	if len(sandboxes) > 0 {
		els := make([]string, len(sandboxes))
		for i, s := range sandboxes {
			els[i] = element(s)
		}
		w("\t\telements = { %s }", strings.Join(els, ", "))
	}
	w("\t}")
	w("\tset floor4 {")
	w("\t\ttype ipv4_addr")
	w("\t\tflags interval")
	var fl []string
	for _, p := range blocked.Ranges {
		if p.Addr().Is4() {
			fl = append(fl, p.String())
		}
	}
	w("\t\telements = { %s }", strings.Join(fl, ", "))
	w("\t}")

	w("\tchain pre_filter {")
	w("\t\ttype filter hook prerouting priority mangle; policy accept;")
	w("\t\tiifname %s jump from_sandbox", sb)
	w("\t}")
	w("\tchain from_sandbox {")
	w("\t\tmeta nfproto ipv6 counter drop")
	w("\t\tiifname . ip saddr != @sandboxes counter drop")
	w("\t\tct state established,related accept")
	w("\t\tudp dport 53 accept")
	if cfg.OtherPort != 0 {
		w("\t\tmeta l4proto tcp accept")
	} else {
		w("\t\ttcp dport { 53, 80, 443 } accept")
	}
	w("\t\tcounter drop")
	w("\t}")

	w("\tchain pre_nat {")
	w("\t\ttype nat hook prerouting priority dstnat; policy accept;")
	w("\t\tiifname %s meta nfproto ipv4 meta l4proto { tcp, udp } th dport 53 redirect to :%d", sb, cfg.DNSPort)
	w("\t\tiifname %s meta nfproto ipv4 tcp dport 80 redirect to :%d", sb, cfg.HTTPPort)
	w("\t\tiifname %s meta nfproto ipv4 tcp dport 443 redirect to :%d", sb, cfg.TLSPort)
	if cfg.OtherPort != 0 {
		w("\t\tiifname %s meta nfproto ipv4 meta l4proto tcp redirect to :%d", sb, cfg.OtherPort)
	}
	w("\t}")

	w("\tchain input {")
	w("\t\ttype filter hook input priority filter; policy accept;")
	w("\t\tiifname %s ct state established,related accept", sb)
	w("\t\tiifname %s ct status dnat tcp dport %s accept", sb, ports)
	w("\t\tiifname %s ct status dnat udp dport %d accept", sb, cfg.DNSPort)
	w("\t\tiifname %s counter drop", sb)
	w("\t\tiifname != \"lo\" tcp dport %s counter drop", ports)
	w("\t\tiifname != \"lo\" udp dport %d counter drop", cfg.DNSPort)
	w("\t}")

	w("\tchain forward {")
	w("\t\ttype filter hook forward priority filter; policy accept;")
	w("\t\tiifname %s counter drop", sb)
	w("\t\toifname %s counter drop", sb)
	w("\t}")

	w("\tchain output {")
	w("\t\ttype filter hook output priority filter; policy accept;")
	w("\t\tmeta mark 0x%x ip daddr @floor4 counter reject with icmp type admin-prohibited", GuardMark)
	w("\t}")
	w("}")
	return b.String()
}

// nft runs `nft -f -` with script on stdin.
func nft(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
