package token

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"path/filepath"
)

// Credential is what the API checks tokens against: the plaintext token (default mode) or
// only its SHA-256 (hash-only mode, Token empty).
type Credential struct {
	Token string
	Sum   [sha256.Size]byte
	// Where says where the credential came from, for the log: the token file, or
	// "sha256 in <hash file>".
	Where string
}

// LoadCredential reads hutchd's API credential. Default (hashFile empty): the token in
// <stateDir>/token, created (0600) on first start. With hashFile: only the hash from that file,
// and <stateDir>/token must not exist (CheckNoPlaintext: an old one is refused, never deleted,
// as it may be the only copy of the token). Errors name the file and what is wrong with it.
func LoadCredential(stateDir, hashFile string, log *slog.Logger) (Credential, error) {
	tokPath := filepath.Join(stateDir, FileName)
	if hashFile != "" {
		sum, err := LoadHash(hashFile)
		if err != nil {
			return Credential{}, err
		}
		if err := CheckNoPlaintext(tokPath, sum); err != nil {
			return Credential{}, err
		}
		log.Info("API token: hash-only mode, no token file", "hash_file", hashFile)
		return Credential{Sum: sum, Where: "sha256 in " + hashFile}, nil
	}
	tok, created, err := LoadOrCreate(tokPath)
	if err != nil {
		return Credential{}, fmt.Errorf("API token: %w", err)
	}
	if created {
		log.Info("created API token", "path", tokPath)
	} else {
		log.Info("using API token", "path", tokPath)
	}
	return Credential{Token: tok, Sum: sha256.Sum256([]byte(tok)), Where: tokPath}, nil
}
