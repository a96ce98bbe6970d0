package cli

import (
	"github.com/hutchdev/hutch/client"
)

// target is where hutchd is and how to authenticate to it.
type target struct {
	URL   string
	Token string
}

// discover finds hutchd: flags first, then the environment and hutchd's state directory
// (client.Discover has the order and the errors).
func discover(flagURL, flagToken string, env Env) (target, error) {
	u, tok, err := client.Discover(flagURL, flagToken, func(k string) string {
		v, _ := env(k)
		return v
	})
	return target{URL: u, Token: tok}, err
}
