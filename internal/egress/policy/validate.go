package policy

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
)

// Limits on a Spec's size.
const (
	MaxHosts        = 1000 // entries in Allow, Deny, and in each rule's or placeholder's Hosts
	MaxRules        = 200
	MaxPlaceholders = 100
	MaxPorts        = 100
	MaxHeaders      = 50 // set + removed headers per rule
	MaxValueLen     = 8 << 10
)

// Lookups tell Validate which names exist outside the Spec. A nil func means "none exist".
type Lookups struct {
	Secret   func(name string) bool // secrets (PUT /v1/secrets/{name})
	Handler  func(name string) bool // operator handlers in hutchd's config
	Upstream func(name string) bool // operator upstreams in hutchd's config
}

var (
	ruleIDRe  = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	envRe     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	prefixRe  = regexp.MustCompile(`^[A-Za-z0-9_-]{0,32}$`)
	tokenRe   = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
	templRe   = regexp.MustCompile(`\$\{([^}]*)\}`)
	secretRe  = regexp.MustCompile(`^secrets\.([A-Za-z_][A-Za-z0-9_.-]{0,127})$`)
	forbidden = map[string]bool{
		"host": true, "connection": true, "content-length": true, "transfer-encoding": true,
		"te": true, "trailer": true, "upgrade": true, "keep-alive": true, "proxy-connection": true,
		"proxy-authorization": true, "proxy-authenticate": true,
	}
)

// Validate checks s against the rules of EGRESS.md §4.1 and the names in l. The error is an
// *errdefs.Error with code EGRESS_POLICY_INVALID whose message starts with the JSON pointer
// (RFC 6901) of the first bad field, also in its context as "pointer" ("/rules/0/hosts/1").
func Validate(s Spec, l Lookups) error { return validate(&s, &l) }

func invalid(ptr, format string, args ...any) error {
	return errdefs.Newf(errdefs.CodeEgressPolicyInvalid, "%s: %s", ptr, fmt.Sprintf(format, args...)).With("pointer", ptr)
}

// MaxEcho is the most bytes of a caller's value an error message quotes.
const MaxEcho = 200

// echo returns v for quoting in an error message: cut to MaxEcho bytes (marked "…").
func echo(v string) string {
	if len(v) <= MaxEcho {
		return v
	}
	return v[:MaxEcho] + "…"
}

// maxPatternLen is the longest host pattern: "*." and a 253-byte name.
const maxPatternLen = 255

// deniedEnv are environment variable names a placeholder may not take: the sandbox's own
// workings (paths, shell, locale, loader, CA bundles, interpreter options) and HUTCH_*. Entries
// ending in "*" are prefixes.
var deniedEnv = []string{
	"PATH", "HOME", "SHELL", "USER", "LOGNAME", "PWD", "OLDPWD", "TERM", "LANG", "LANGUAGE", "LC_*", "LD_*",
	"TZ", "TMPDIR", "HOSTNAME", "IFS", "ENV", "BASH_ENV", "BASH_FUNC_*", "HUTCH_*",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
	"GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO", "DENO_CERT",
	"NODE_OPTIONS", "NODE_PATH", "PYTHON*", "PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "GCONV_PATH",
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
}

// envDenied reports whether a placeholder may not use env (case-insensitive, as proxy
// variables are read in either case).
func envDenied(env string) bool {
	u := strings.ToUpper(env)
	for _, d := range deniedEnv {
		if p, ok := strings.CutSuffix(d, "*"); ok {
			if strings.HasPrefix(u, p) {
				return true
			}
		} else if u == d {
			return true
		}
	}
	return false
}

// tooBroad reports why p is too broad for a host a real secret is sent to ("" when it is
// not): "*" (every host) or a wildcard over a single label ("*.com", any name in a TLD).
func tooBroad(p Pattern) string {
	switch {
	case p.any:
		return "\"*\" would send the secret to every host"
	case p.suffix != "" && !strings.Contains(p.suffix[1:], "."):
		return fmt.Sprintf("%q covers a whole top-level domain", p.raw)
	}
	return ""
}

// validate checks shape always and names only when l is non-nil.
func validate(s *Spec, l *Lookups) error {
	switch s.Mode {
	case "", ModeAllowAll, ModeAllowlist, ModeDenyAll:
	default:
		return invalid("/mode", "mode %q is not one of allow-all, allowlist, deny-all", echo(s.Mode))
	}
	allow, err := patternList("/allow", s.Allow)
	if err != nil {
		return err
	}
	if _, err := patternList("/deny", s.Deny); err != nil {
		return err
	}
	if len(s.Ports) > MaxPorts {
		return invalid("/ports", "at most %d ports", MaxPorts)
	}
	seenPort := map[int]bool{}
	for i, p := range s.Ports {
		if p < 1 || p > 65535 {
			return invalid("/ports/"+strconv.Itoa(i), "port %d is not in 1–65535", p)
		}
		if seenPort[p] {
			return invalid("/ports/"+strconv.Itoa(i), "port %d is listed twice", p)
		}
		seenPort[p] = true
	}
	switch s.Inspect {
	case "", InspectRules, InspectAll:
	case InspectNone:
		if len(s.Rules) > 0 {
			return invalid("/rules", "inspect \"none\" never terminates TLS, so rules cannot apply: remove them or use inspect \"rules\"")
		}
		if len(s.Placeholders) > 0 {
			return invalid("/placeholders", "inspect \"none\" never terminates TLS, so placeholders cannot be swapped")
		}
	default:
		return invalid("/inspect", "inspect %q is not one of rules, all, none", echo(s.Inspect))
	}
	switch s.DNS.Denied {
	case "", "nxdomain":
	default:
		return invalid("/dns/denied", "dns.denied %q is not supported (only \"nxdomain\")", echo(s.DNS.Denied))
	}
	if len(s.Rules) > MaxRules {
		return invalid("/rules", "at most %d rules", MaxRules)
	}
	ids := map[string]bool{}
	for i := range s.Rules {
		if err := validateRule(fmt.Sprintf("/rules/%d", i), &s.Rules[i], ids, l); err != nil {
			return err
		}
	}
	if len(s.Placeholders) > MaxPlaceholders {
		return invalid("/placeholders", "at most %d placeholders", MaxPlaceholders)
	}
	envs := map[string]bool{}
	for i := range s.Placeholders {
		if err := validatePlaceholder(fmt.Sprintf("/placeholders/%d", i), s, &s.Placeholders[i], allow, envs, l); err != nil {
			return err
		}
	}
	return nil
}

func patternList(ptr string, ss []string) (patterns, error) {
	if len(ss) > MaxHosts {
		return nil, invalid(ptr, "at most %d host patterns", MaxHosts)
	}
	ps := make(patterns, 0, len(ss))
	for i, s := range ss {
		if len(s) > maxPatternLen {
			return nil, invalid(ptr+"/"+strconv.Itoa(i), "host pattern of %d bytes: at most %d", len(s), maxPatternLen)
		}
		p, err := ParsePattern(s)
		if err != nil {
			return nil, invalid(ptr+"/"+strconv.Itoa(i), "%v", err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func validateRule(ptr string, r *Rule, ids map[string]bool, l *Lookups) error {
	if !ruleIDRe.MatchString(r.ID) {
		return invalid(ptr+"/id", "rule id %q must be 1–64 of [a-z0-9_-]", echo(r.ID))
	}
	if ids[r.ID] {
		return invalid(ptr+"/id", "rule id %q is used twice", r.ID)
	}
	ids[r.ID] = true
	if len(r.Hosts) == 0 {
		return invalid(ptr+"/hosts", "a rule needs at least one host pattern")
	}
	hosts, err := patternList(ptr+"/hosts", r.Hosts)
	if err != nil {
		return err
	}
	if r.Action == ActionInject && r.Inject != nil && injectsSecret(r.Inject) {
		for i, h := range hosts {
			if why := tooBroad(h); why != "" {
				return invalid(fmt.Sprintf("%s/hosts/%d", ptr, i), "a rule that injects a secret needs named hosts: %s", why)
			}
		}
	}
	if r.Match != nil {
		for i, m := range r.Match.Methods {
			if !tokenRe.MatchString(m) || strings.ToUpper(m) != m {
				return invalid(fmt.Sprintf("%s/match/methods/%d", ptr, i), "method %q must be an upper-case HTTP method", echo(m))
			}
		}
		if pm := r.Match.Path; pm != nil {
			switch {
			case (pm.Exact == "") == (pm.Prefix == ""):
				return invalid(ptr+"/match/path", "set exactly one of exact and prefix")
			case pm.Exact != "" && CanonicalPath(pm.Exact) != pm.Exact:
				return invalid(ptr+"/match/path/exact", "path %q is not canonical (want %q)", echo(pm.Exact), echo(CanonicalPath(pm.Exact)))
			case pm.Prefix != "" && (!strings.HasPrefix(pm.Prefix, "/") || strings.Contains(pm.Prefix, "/./") || strings.Contains(pm.Prefix, "/../") || strings.Contains(pm.Prefix, "//")):
				return invalid(ptr+"/match/path/prefix", "path prefix %q must start with \"/\" and hold no \".\", \"..\" or empty segments", echo(pm.Prefix))
			}
		}
	}
	switch r.Action {
	case ActionInject:
		if r.Inject == nil || (len(r.Inject.SetHeaders) == 0 && len(r.Inject.RemoveHeaders) == 0 && r.Inject.BasicAuth == nil) {
			return invalid(ptr+"/inject", "action \"inject\" needs inject.setHeaders, inject.removeHeaders or inject.basicAuth")
		}
		if err := validateInject(ptr+"/inject", r.Inject, l); err != nil {
			return err
		}
	case ActionDeny, ActionHandler, ActionPass:
		if r.Inject != nil {
			return invalid(ptr+"/inject", "inject is only for action \"inject\"")
		}
	case "":
		return invalid(ptr+"/action", "action is required (inject, deny, handler or pass)")
	default:
		return invalid(ptr+"/action", "action %q is not one of inject, deny, handler, pass", echo(r.Action))
	}
	if r.Action == ActionHandler {
		if r.Handler == "" {
			return invalid(ptr+"/handler", "action \"handler\" needs a handler name")
		}
		if l != nil && (l.Handler == nil || !l.Handler(r.Handler)) {
			return invalid(ptr+"/handler", "no handler %q is configured in hutchd", echo(r.Handler))
		}
	} else if r.Handler != "" {
		return invalid(ptr+"/handler", "handler is only for action \"handler\"")
	}
	if r.Upstream != "" {
		if r.Action == ActionDeny || r.Action == ActionHandler {
			return invalid(ptr+"/upstream", "upstream routes apply to actions inject and pass only")
		}
		if l != nil && (l.Upstream == nil || !l.Upstream(r.Upstream)) {
			return invalid(ptr+"/upstream", "no upstream %q is configured in hutchd", echo(r.Upstream))
		}
	}
	return nil
}

func validateInject(ptr string, in *Inject, l *Lookups) error {
	if len(in.SetHeaders)+len(in.RemoveHeaders) > MaxHeaders {
		return invalid(ptr, "at most %d headers per rule", MaxHeaders)
	}
	names := make([]string, 0, len(in.SetHeaders))
	for name := range in.SetHeaders {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := in.SetHeaders[name]
		hp := ptr + "/setHeaders/" + escapePointer(name)
		if err := headerName(hp, name); err != nil {
			return err
		}
		if in.BasicAuth != nil && strings.EqualFold(name, "authorization") {
			return invalid(hp, "set either authorization or basicAuth, not both")
		}
		if err := template(hp, v, l); err != nil {
			return err
		}
	}
	for i, name := range in.RemoveHeaders {
		if err := headerName(fmt.Sprintf("%s/removeHeaders/%d", ptr, i), name); err != nil {
			return err
		}
	}
	if ba := in.BasicAuth; ba != nil {
		if strings.Contains(ba.Username, ":") {
			return invalid(ptr+"/basicAuth/username", "a Basic auth username cannot contain \":\"")
		}
		if err := template(ptr+"/basicAuth/username", ba.Username, l); err != nil {
			return err
		}
		if ba.Password == "" {
			return invalid(ptr+"/basicAuth/password", "password is required")
		}
		if err := template(ptr+"/basicAuth/password", ba.Password, l); err != nil {
			return err
		}
	}
	return nil
}

func headerName(ptr, name string) error {
	if !tokenRe.MatchString(name) {
		return invalid(ptr, "%q is not a valid header name", echo(name))
	}
	lower := strings.ToLower(name)
	if forbidden[lower] || strings.HasPrefix(lower, "hutch-") {
		return invalid(ptr, "header %q cannot be set or removed by a rule", http.CanonicalHeaderKey(name))
	}
	return nil
}

// template checks a header template: "${secrets.NAME}" references only, values printable.
func template(ptr, v string, l *Lookups) error {
	if len(v) > MaxValueLen {
		return invalid(ptr, "value longer than %d bytes", MaxValueLen)
	}
	names, err := TemplateSecrets(v)
	if err != nil {
		return invalid(ptr, "%v", err)
	}
	for _, n := range names {
		if l != nil && (l.Secret == nil || !l.Secret(n)) {
			return invalid(ptr, "secret %q does not exist (PUT /v1/secrets/%s first)", n, n)
		}
	}
	return nil
}

func validatePlaceholder(ptr string, s *Spec, ph *Placeholder, allow patterns, envs map[string]bool, l *Lookups) error {
	if ph.Secret == "" {
		return invalid(ptr+"/secret", "secret is required")
	}
	if !secretRe.MatchString("secrets." + ph.Secret) {
		return invalid(ptr+"/secret", "%q is not a valid secret name", echo(ph.Secret))
	}
	if l != nil && (l.Secret == nil || !l.Secret(ph.Secret)) {
		return invalid(ptr+"/secret", "secret %q does not exist (PUT /v1/secrets/%s first)", ph.Secret, ph.Secret)
	}
	env := ph.Env
	if env == "" {
		env = ph.Secret
	}
	if !envRe.MatchString(env) {
		return invalid(ptr+"/env", "%q is not a valid environment variable name", echo(env))
	}
	if envDenied(env) {
		return invalid(ptr+"/env", "%q cannot hold a placeholder: the sandbox itself depends on it", env)
	}
	if envs[env] {
		return invalid(ptr+"/env", "env %q is bound twice", env)
	}
	envs[env] = true
	if len(ph.Hosts) == 0 {
		return invalid(ptr+"/hosts", "a placeholder needs at least one host pattern")
	}
	hs, err := patternList(ptr+"/hosts", ph.Hosts)
	if err != nil {
		return err
	}
	for i, h := range hs {
		if why := tooBroad(h); why != "" {
			return invalid(fmt.Sprintf("%s/hosts/%d", ptr, i), "a placeholder needs named hosts: %s", why)
		}
		if !allowedPattern(s, allow, h) {
			return invalid(fmt.Sprintf("%s/hosts/%d", ptr, i), "host %q is not allowed by the policy (add it to allow)", h)
		}
	}
	for i, in := range ph.In {
		ip := fmt.Sprintf("%s/in/%d", ptr, i)
		switch {
		case in == "query", in == "path", in == "body":
		case strings.HasPrefix(in, "header:"):
			name := strings.TrimPrefix(in, "header:")
			if !tokenRe.MatchString(name) || strings.ToLower(name) != name {
				return invalid(ip, "%q: header names are lower case tokens", echo(in))
			}
		default:
			return invalid(ip, "%q is not one of header:<name>, query, path, body", echo(in))
		}
	}
	if !prefixRe.MatchString(ph.Prefix) {
		return invalid(ptr+"/prefix", "prefix must be at most 32 of [A-Za-z0-9_-]")
	}
	switch ph.OnViolation {
	case "", "block", "block_and_stop", "pass":
	default:
		return invalid(ptr+"/onViolation", "onViolation %q is not one of block, block_and_stop, pass", echo(ph.OnViolation))
	}
	return nil
}

// allowedPattern reports whether every name p matches is allowed by the mode and allow list
// (deny entries that overlap are left to evaluation time).
func allowedPattern(s *Spec, allow patterns, p Pattern) bool {
	switch s.Mode {
	case ModeDenyAll:
		return false
	case ModeAllowlist:
		for _, a := range allow {
			if a.Covers(p) {
				return true
			}
		}
		return false
	}
	return true
}

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// TemplateSecrets returns the secret names a header template references ("${secrets.NAME}"),
// in order, with duplicates. It fails on any other "${...}" and on control characters.
func TemplateSecrets(tmpl string) ([]string, error) {
	for i := 0; i < len(tmpl); i++ {
		if c := tmpl[i]; c < 0x20 || c == 0x7f {
			return nil, fmt.Errorf("control character at byte %d", i)
		}
	}
	var names []string
	for _, m := range templRe.FindAllStringSubmatch(tmpl, -1) {
		sm := secretRe.FindStringSubmatch(m[1])
		if sm == nil {
			return nil, fmt.Errorf("%q: only ${secrets.NAME} is supported", echo(m[0]))
		}
		names = append(names, sm[1])
	}
	if rest := templRe.ReplaceAllString(tmpl, ""); strings.Contains(rest, "${") {
		return nil, fmt.Errorf("unterminated \"${\" in %q", echo(tmpl))
	}
	return names, nil
}

// Expand resolves the "${secrets.NAME}" references of a template through secret (whose errors
// are returned as they are). The template must have passed validation.
func Expand(tmpl string, secret func(name string) (string, error)) (string, error) {
	var err error
	out := templRe.ReplaceAllStringFunc(tmpl, func(m string) string {
		if err != nil {
			return ""
		}
		sm := secretRe.FindStringSubmatch(m[2 : len(m)-1])
		if sm == nil {
			err = fmt.Errorf("policy: bad template reference %q", m)
			return ""
		}
		v, e := secret(sm[1])
		if e != nil {
			err = e
			return ""
		}
		return v
	})
	if err != nil {
		return "", err
	}
	return out, nil
}

// SecretNames returns the names of the secrets s uses (header templates and placeholders),
// sorted and without duplicates.
func SecretNames(s Spec) []string {
	set := map[string]bool{}
	add := func(t string) {
		ns, _ := TemplateSecrets(t)
		for _, n := range ns {
			set[n] = true
		}
	}
	for _, r := range s.Rules {
		if r.Inject == nil {
			continue
		}
		for _, v := range r.Inject.SetHeaders {
			add(v)
		}
		if r.Inject.BasicAuth != nil {
			add(r.Inject.BasicAuth.Username)
			add(r.Inject.BasicAuth.Password)
		}
	}
	for _, ph := range s.Placeholders {
		if ph.Secret != "" {
			set[ph.Secret] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// injectsSecret reports whether in sends a credential: a header template that references a
// secret, or Basic auth.
func injectsSecret(in *Inject) bool {
	if in.BasicAuth != nil {
		return true
	}
	for _, v := range in.SetHeaders {
		if names, _ := TemplateSecrets(v); len(names) > 0 {
			return true
		}
	}
	return false
}
