package cli

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// DefaultStateDir is hutchd's state directory when HUTCH_STATE_DIR is not set.
const DefaultStateDir = "/var/lib/hutch"

// target is where hutchd is and how to authenticate to it.
type target struct {
	URL   string
	Token string
}

// stateFile is <state>/hutchd.json, written by hutchd at start.
type stateFile struct {
	URL string `json:"url"`
}

// discover finds hutchd. The URL is the first of: flagURL, $HUTCH_URL, "url" of
// <state>/hutchd.json, client.DefaultURL. The token is the first of: flagToken, $HUTCH_TOKEN,
// the content of <state>/token (surrounding whitespace trimmed). <state> is $HUTCH_STATE_DIR
// or /var/lib/hutch. A missing or unreadable hutchd.json falls back to the default URL; a
// malformed one is an error. A token that cannot be found is an UNAUTHENTICATED error that
// says what to do.
func discover(flagURL, flagToken string, env Env) (target, error) {
	state := DefaultStateDir
	if v, ok := env("HUTCH_STATE_DIR"); ok && v != "" {
		state = v
	}
	t := target{URL: flagURL, Token: flagToken}
	if t.URL == "" {
		if v, ok := env("HUTCH_URL"); ok && v != "" {
			t.URL = v
		}
	}
	if t.URL == "" {
		u, err := readStateURL(filepath.Join(state, "hutchd.json"))
		if err != nil {
			return target{}, err
		}
		t.URL = u
	}
	if t.URL == "" {
		t.URL = client.DefaultURL
	}
	if t.Token == "" {
		if v, ok := env("HUTCH_TOKEN"); ok && v != "" {
			t.Token = v
		}
	}
	if t.Token == "" {
		tok, err := readToken(filepath.Join(state, "token"))
		if err != nil {
			return target{}, err
		}
		t.Token = tok
	}
	return t, nil
}

func readStateURL(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return "", nil
	}
	if err != nil {
		return "", errdefs.Wrap(errdefs.CodeInvalidArgument, err, "read hutchd address")
	}
	var sf stateFile
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
			"no API token: %s does not exist (hutchd creates it on first start; run as root or set HUTCH_TOKEN)", path)
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
