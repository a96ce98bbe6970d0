package preview

import (
	"net"
	"strconv"
	"strings"

	"github.com/hutchdev/hutch/internal/sandboxid"
)

// Target is what a preview host name routes to.
type Target struct {
	Port      int // MinPort–MaxPort
	SandboxID sandboxid.ID
	Token     string // 1–16 of [a-z0-9_]
}

// ParseHost parses a preview Host header, {port}-{id}-{token}.{domain}[:anyport], case-
// insensitively (a trailing dot after the domain is allowed). The first label holds the rest:
// port is 4–5 digits without a leading zero in MinPort–MaxPort, id is everything between the
// first and the last '-' and must be a valid sandbox ID, token is after the last '-'. ok is
// false for anything else.
func ParseHost(host, domain string) (t Target, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	if domain == "" {
		return Target{}, false
	}
	label, ok := strings.CutSuffix(host, "."+domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return Target{}, false
	}
	first := strings.IndexByte(label, '-')
	last := strings.LastIndexByte(label, '-')
	if first < 0 || last <= first+1 {
		return Target{}, false
	}
	portStr, id, token := label[:first], label[first+1:last], label[last+1:]
	if len(portStr) < 4 || len(portStr) > 5 || portStr[0] == '0' {
		return Target{}, false
	}
	for i := 0; i < len(portStr); i++ {
		if portStr[i] < '0' || portStr[i] > '9' {
			return Target{}, false
		}
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < MinPort || port > MaxPort {
		return Target{}, false
	}
	sid, err := sandboxid.Parse(id)
	if err != nil || !ValidToken(token) {
		return Target{}, false
	}
	return Target{Port: port, SandboxID: sid, Token: token}, true
}
