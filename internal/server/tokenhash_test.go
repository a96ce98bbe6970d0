package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/hutchdev/hutch/internal/token"
)

// TestTokenSum: with Deps.TokenSum (hutchd's hash-only mode) exactly the token of that hash is
// accepted; the token given to New, other tokens, the hash itself and an empty token are
// refused with 401 UNAUTHENTICATED.
func TestTokenSum(t *testing.T) {
	tok, err := token.New()
	if err != nil {
		t.Fatal(err)
	}
	srv := hardenedServer(t, func(d *Deps) { d.TokenSum = token.Sum(tok); d.UnauthenticatedRateLimit = &RateLimit{0, 0} })
	line := token.HashLine(tok)
	for _, c := range []struct {
		auth string
		want int
	}{
		{"Bearer " + tok, http.StatusOK},
		{"bearer " + tok, http.StatusOK},
		{"Bearer " + testToken, http.StatusUnauthorized},
		{"Bearer " + tok[:63], http.StatusUnauthorized},
		{"Bearer " + tok + "0", http.StatusUnauthorized},
		{"Bearer " + line, http.StatusUnauthorized},
		{"Bearer " + line[len("sha256:"):], http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/sb1/ports", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != c.want || c.want == http.StatusUnauthorized && env.Code != "UNAUTHENTICATED" {
			t.Errorf("Authorization %q: %d %s; want %d", c.auth, resp.StatusCode, env.Code, c.want)
		}
	}
}
