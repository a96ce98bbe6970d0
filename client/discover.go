package client

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
)

// DefaultStateDir is hutchd's state directory when HUTCH_STATE_DIR is not set.
const DefaultStateDir = "/var/lib/hutch"

// Discover finds a local hutchd the way the hutch CLI does. The URL is the first of: url,
// $HUTCH_URL, "url" of <state>/hutchd.json (written by hutchd at start), DefaultURL. The token
// is the first of: token, $HUTCH_TOKEN, the content of <state>/token (whitespace trimmed).
// <state> is $HUTCH_STATE_DIR or DefaultStateDir. getenv reads the environment (os.Getenv;
// nil means os.Getenv).
//
// Errors: a malformed hutchd.json is VALIDATION_FAILED; a token that cannot be found is
// UNAUTHENTICATED with a message that says what to do. A missing or unreadable hutchd.json
// falls back to DefaultURL.
func Discover(url, token string, getenv func(string) string) (string, string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	state := DefaultStateDir
	if v := getenv("HUTCH_STATE_DIR"); v != "" {
		state = v
	}
	if url == "" {
		url = getenv("HUTCH_URL")
	}
	if url == "" {
		u, err := readStateURL(filepath.Join(state, "hutchd.json"))
		if err != nil {
			return "", "", err
		}
		url = u
	}
	if url == "" {
		url = DefaultURL
	}
	if token == "" {
		token = getenv("HUTCH_TOKEN")
	}
	if token == "" {
		tok, err := readToken(filepath.Join(state, "token"))
		if err != nil {
			return "", "", err
		}
		token = tok
	}
	return url, token, nil
}

func readStateURL(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return "", nil
	}
	if err != nil {
		return "", errdefs.Wrap(errdefs.CodeInvalidArgument, err, "read hutchd address")
	}
	var sf struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(b, &sf); err != nil {
		return "", errdefs.Wrap(errdefs.CodeInvalidArgument, err, "parse "+path+" (set HUTCH_URL or --url)")
	}
	return sf.URL, nil
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errdefs.Newf(errdefs.CodeUnauthenticated,
			"no API token: %s does not exist (hutchd creates it on first start unless it runs with --token-hash-file; run as root or set HUTCH_TOKEN)", path)
	case err != nil:
		return "", errdefs.Newf(errdefs.CodeUnauthenticated,
			"cannot read the API token: %w: run as root or set HUTCH_TOKEN", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errdefs.Newf(errdefs.CodeUnauthenticated, "API token file %s is empty: set HUTCH_TOKEN", path)
	}
	return tok, nil
}
