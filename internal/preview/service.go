package preview

import (
	"context"
	"log/slog"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// MaxNameLen is the longest port label, in characters.
const MaxNameLen = 63

// Store is what Service needs of the metadata store; *store.Store implements it (see its
// methods for the error codes).
type Store interface {
	InsertPort(ctx context.Context, p store.Port) (store.Port, error)
	GetPort(ctx context.Context, sandboxID string, port int) (store.Port, error)
	ListPorts(ctx context.Context, sandboxID string) ([]store.Port, error)
	DeletePort(ctx context.Context, sandboxID string, port int) error
}

// ExposeRequest is the body of POST /v1/sandboxes/{id}/ports.
type ExposeRequest struct {
	Port  int
	Name  string
	Token string // empty: a random one (NewToken)
}

// Port is an exposed port's public view.
type Port struct {
	Port      int
	Name      string
	URL       string
	Token     string
	ExposedAt time.Time
}

// Service exposes and unexposes sandbox ports. It is safe for concurrent use.
type Service struct {
	cfg   Config
	store Store
	log   *slog.Logger
}

// NewService returns a Service over st whose URLs follow cfg.
func NewService(cfg Config, st Store, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, store: st, log: log}
}

// Config returns the service's URL configuration.
func (s *Service) Config() Config { return s.cfg }

// Expose exposes req.Port of sandbox id and returns it with its preview URL. It only records
// the port: nothing needs to listen yet, and a stopped sandbox stays stopped until its URL is
// used. Exposing an exposed port again with the same token, or with none, and the same name
// or none, is idempotent and returns the stored record. Errors: INVALID_SANDBOX_ID,
// RESERVED_SANDBOX_ID, INVALID_PORT {port}, INVALID_PORT_TOKEN, VALIDATION_FAILED (name),
// SANDBOX_NOT_FOUND, PORT_ALREADY_EXPOSED {port} (exposed with another token or name),
// PORT_TOKEN_IN_USE {port, otherPort}.
func (s *Service) Expose(ctx context.Context, id string, req ExposeRequest) (Port, error) {
	if _, err := sandboxid.Parse(id); err != nil {
		return Port{}, err
	}
	if err := s.cfg.ValidatePort(req.Port); err != nil {
		return Port{}, err
	}
	if req.Token != "" {
		if err := ValidateToken(req.Token); err != nil {
			return Port{}, err
		}
	}
	if err := validateName(req.Name); err != nil {
		return Port{}, err
	}
	for range 3 {
		cur, err := s.store.GetPort(ctx, id, req.Port)
		switch {
		case err == nil:
			if (req.Token != "" && req.Token != cur.Token) || (req.Name != "" && req.Name != cur.Name) {
				return Port{}, errdefs.Newf(errdefs.CodePortAlreadyExposed, "port %d is already exposed with another token or name: unexpose it first", req.Port).With("port", req.Port)
			}
			return s.view(cur), nil
		case !errdefs.IsCode(err, errdefs.CodePortNotExposed):
			return Port{}, err
		}
		token := req.Token
		if token == "" {
			token = NewToken()
		}
		p, err := s.store.InsertPort(ctx, store.Port{SandboxID: id, Port: req.Port, Token: token, Name: req.Name})
		switch {
		case err == nil:
			s.log.InfoContext(ctx, "port exposed", "sandbox_id", id, "port", req.Port)
			return s.view(p), nil
		case errdefs.IsCode(err, errdefs.CodePortAlreadyExposed):
			continue // a concurrent Expose won: compare with its record
		case errdefs.IsCode(err, errdefs.CodeTokenInUse) && req.Token == "":
			continue // a random token that collided: draw another
		default:
			return Port{}, err
		}
	}
	return Port{}, errdefs.Newf(errdefs.CodeResourceBusy, "port %d is being changed concurrently: try again", req.Port).With("port", req.Port)
}

// Unexpose removes an exposed port; its preview URL stops routing at once (open connections,
// such as WebSockets, are not cut). Errors: INVALID_SANDBOX_ID, INVALID_PORT (not
// 1–65535), PORT_NOT_EXPOSED {port}.
func (s *Service) Unexpose(ctx context.Context, id string, port int) error {
	if _, err := sandboxid.Parse(id); err != nil {
		return err
	}
	if port < 1 || port > MaxPort {
		return errdefs.Newf(errdefs.CodeInvalidPort, "port %d is outside 1-%d", port, MaxPort).With("port", port)
	}
	if err := s.store.DeletePort(ctx, id, port); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "port unexposed", "sandbox_id", id, "port", port)
	return nil
}

// List returns the exposed ports of sandbox id, ordered by port (empty, not nil, when none).
// Errors: INVALID_SANDBOX_ID, SANDBOX_NOT_FOUND.
func (s *Service) List(ctx context.Context, id string) ([]Port, error) {
	if _, err := sandboxid.Parse(id); err != nil {
		return nil, err
	}
	ps, err := s.store.ListPorts(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]Port, 0, len(ps))
	for _, p := range ps {
		out = append(out, s.view(p))
	}
	return out, nil
}

func (s *Service) view(p store.Port) Port {
	return Port{Port: p.Port, Name: p.Name, URL: s.cfg.URL(p.SandboxID, p.Port, p.Token), Token: p.Token, ExposedAt: p.CreatedAt}
}

// validateName checks a port label: at most MaxNameLen printable characters.
func validateName(name string) error {
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxNameLen {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "a port name is at most %d characters of valid UTF-8", MaxNameLen)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "a port name must be printable: it has %U", r)
		}
	}
	return nil
}
