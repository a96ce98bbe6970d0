package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/policystore"
	"github.com/hutchdev/hutch/internal/egress/webhook"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/store"
)

// TestEgressPolicyLookups checks that policy validation sees the handlers, upstreams and
// secrets hutchd is configured with: a rule naming a configured handler (--egress-handler)
// is accepted, an unknown handler, upstream or secret is refused with EGRESS_POLICY_INVALID
// and the JSON pointer of the field.
func TestEgressPolicyLookups(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg, err := config.Load([]string{
		"--state-dir", dir,
		"--egress-handler", "ops-gateway=HANDLER_HMAC@http://127.0.0.1:9555/hook",
		"--egress-handler", "local-audit=AUDIT_HMAC@unix:/run/hutch-handlers/audit.sock",
		"--upstream", "internal-api=127.0.0.1:9443",
	}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	handlers, err := webhook.NewAll(cfg.EgressHandlers)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "keys", "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := secret.NewStore(st, box)
	if _, err := secrets.Set(ctx, "API_TOKEN", []byte("real-token-value")); err != nil {
		t.Fatal(err)
	}
	e := policystore.New(policystore.Config{Lookups: policystore.Lookups(secrets.Exists, cfg.Upstreams, handlers)})

	handlerRule := func(name string) policy.Spec {
		return policy.Spec{Mode: policy.ModeAllowlist, Rules: []policy.Rule{
			{ID: "hook", Hosts: []string{"hooks.example.test"}, Action: policy.ActionHandler, Handler: name}}}
	}
	injectRule := func(secretName, upstream string) policy.Spec {
		return policy.Spec{Allow: []string{"api.internal.test"}, Rules: []policy.Rule{
			{ID: "api", Hosts: []string{"api.internal.test"}, Action: policy.ActionInject, Upstream: upstream,
				Inject: &policy.Inject{SetHeaders: map[string]string{"authorization": "Bearer ${secrets." + secretName + "}"}}}}}
	}
	for _, tc := range []struct {
		name    string
		spec    policy.Spec
		pointer string // "" = accepted
	}{
		{"configured handler", handlerRule("ops-gateway"), ""},
		{"configured unix handler", handlerRule("local-audit"), ""},
		{"unknown handler", handlerRule("nope"), "/rules/0/handler"},
		{"handler name is case-sensitive", handlerRule("OPS-GATEWAY"), "/rules/0/handler"},
		{"configured upstream and secret", injectRule("API_TOKEN", "internal-api"), ""},
		{"unknown upstream", injectRule("API_TOKEN", "other-api"), "/rules/0/upstream"},
		{"unknown secret", injectRule("NO_SUCH", ""), "/rules/0/inject/setHeaders/authorization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := e.Validate(tc.spec)
			if tc.pointer == "" {
				if err != nil || c == nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if !errdefs.IsCode(err, errdefs.CodeEgressPolicyInvalid) {
				t.Fatalf("validate: err %v, want %s", err, errdefs.CodeEgressPolicyInvalid)
			}
			var ee *errdefs.Error
			if !errors.As(err, &ee) || ee.Context["pointer"] != tc.pointer {
				t.Fatalf("validate: err %v, want pointer %s", err, tc.pointer)
			}
		})
	}
}
