package firewall

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

func testConfig() Config {
	return Config{Table: "hutchfwtest", IfPrefix: "hft", DNSPort: 25053, HTTPPort: 25001, TLSPort: 25002}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{
		{Table: "bad name", IfPrefix: "h", DNSPort: 1, HTTPPort: 2, TLSPort: 3},
		{Table: "t", IfPrefix: "h*", DNSPort: 1, HTTPPort: 2, TLSPort: 3},
		{Table: "t", IfPrefix: "h", DNSPort: 0, HTTPPort: 2, TLSPort: 3},
	} {
		if _, err := New(cfg, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("New(%+v) err = %v; want ErrInvalidArgument", cfg, err)
		}
	}
}

func TestRulesetShape(t *testing.T) {
	rs := Ruleset(testConfig(), []Sandbox{{"hft0", netip.MustParseAddr("10.99.0.2")}})
	for _, want := range []string{
		"table inet hutchfwtest {",
		`elements = { "hft0" . 10.99.0.2 }`,
		`iifname "hft*" jump from_sandbox`,
		`iifname . ip saddr != @sandboxes counter drop`,
		`th dport 53 redirect to :25053`,
		`tcp dport 80 redirect to :25001`,
		`tcp dport 443 redirect to :25002`,
		`ct status dnat tcp dport { 25053, 25001, 25002 } accept`,
		`iifname "hft*" counter drop`,
		`oifname "hft*" counter drop`,
	} {
		if !strings.Contains(rs, want) {
			t.Errorf("Ruleset lacks %q:\n%s", want, rs)
		}
	}
}

func TestApplyRemove(t *testing.T) {
	testutil.RequiresRoot(t, "nftables")
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft CLI")
	}
	ctx := context.Background()
	f, err := New(testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Remove(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	s0 := Sandbox{"hft0", netip.MustParseAddr("10.99.0.2")}
	s1 := Sandbox{"hft1", netip.MustParseAddr("10.99.0.6")}
	list := func() string {
		out, err := exec.Command("nft", "list", "table", "inet", "hutchfwtest").CombinedOutput()
		if err != nil {
			t.Fatalf("nft list: %v %s", err, out)
		}
		return string(out)
	}
	// Applying twice yields one table (reconcile), with the given elements.
	for range 2 {
		if err := f.Apply(ctx, []Sandbox{s0}); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	if got := list(); !strings.Contains(got, `"hft0" . 10.99.0.2`) || strings.Count(got, "chain from_sandbox") != 1 {
		t.Errorf("table after Apply:\n%s", got)
	}
	if err := f.AddSandbox(ctx, s1); err != nil {
		t.Fatalf("AddSandbox: %v", err)
	}
	if got := list(); !strings.Contains(got, `"hft1" . 10.99.0.6`) {
		t.Errorf("table after AddSandbox lacks hft1:\n%s", got)
	}
	if err := f.RemoveSandbox(ctx, s0); err != nil {
		t.Fatalf("RemoveSandbox: %v", err)
	}
	if got := list(); strings.Contains(got, `"hft0"`) {
		t.Errorf("table after RemoveSandbox still has hft0:\n%s", got)
	}
	if ok, err := f.Exists(ctx); !ok || err != nil {
		t.Errorf("Exists = %v, %v; want true", ok, err)
	}
	for range 2 {
		if err := f.Remove(ctx); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	if ok, err := f.Exists(ctx); ok || err != nil {
		t.Errorf("Exists after Remove = %v, %v; want false", ok, err)
	}
}

func TestRulesetOtherPort(t *testing.T) {
	cfg := testConfig()
	cfg.OtherPort = 25003
	rs := Ruleset(cfg, nil)
	for _, want := range []string{
		"meta l4proto tcp accept",
		`meta nfproto ipv4 meta l4proto tcp redirect to :25003`,
		`ct status dnat tcp dport { 25053, 25001, 25002, 25003 } accept`,
	} {
		if !strings.Contains(rs, want) {
			t.Errorf("Ruleset lacks %q:\n%s", want, rs)
		}
	}
	if strings.Index(rs, "redirect to :25003") < strings.Index(rs, "tcp dport 443 redirect") {
		t.Error("the catch-all redirect comes before the 80/443 ones")
	}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("nft"); err == nil {
			cmd := exec.Command("nft", "-c", "-f", "-")
			cmd.Stdin = strings.NewReader(rs)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("nft -c refuses the ruleset: %v\n%s", err, out)
			}
		}
	}
}
