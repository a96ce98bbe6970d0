package daemon

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/token"
)

// credential is what the API checks tokens against: the plaintext token (default mode) or only
// its SHA-256 (hash-only mode, token empty).
type credential struct {
	token string
	sum   [sha256.Size]byte
	where string // for the log: the token file or "sha256 in <hash file>"
}

// loadToken reads the API credential. Default: the token in <state>/token, created (0600) on
// first start. With cfg.TokenHashFile: only the hash from that file, and <state>/token must not
// exist (token.CheckNoPlaintext: an old one is refused, never deleted, as it may be the only
// copy of the token). Errors name the file and what is wrong with it.
func loadToken(cfg config.Config, log *slog.Logger) (credential, error) {
	tokPath := filepath.Join(cfg.StateDir, token.FileName)
	if cfg.TokenHashFile != "" {
		sum, err := token.LoadHash(cfg.TokenHashFile)
		if err != nil {
			return credential{}, err
		}
		if err := token.CheckNoPlaintext(tokPath, sum); err != nil {
			return credential{}, err
		}
		where := "sha256 in " + cfg.TokenHashFile
		log.Info("API token: hash-only mode, no token file", "hash_file", cfg.TokenHashFile)
		return credential{sum: sum, where: where}, nil
	}
	tok, created, err := token.LoadOrCreate(tokPath)
	if err != nil {
		return credential{}, fmt.Errorf("API token: %w", err)
	}
	if created {
		log.Info("created API token", "path", tokPath)
	} else {
		log.Info("using API token", "path", tokPath)
	}
	return credential{token: tok, sum: sha256.Sum256([]byte(tok)), where: tokPath}, nil
}
