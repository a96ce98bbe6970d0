package server

import (
	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/secret"
)

// This file maps secrets to their api/v1 wire form (never a value).

// toSecrets maps a list; nil stays nil.
func toSecrets(in []secret.Info) []v1.Secret {
	if in == nil {
		return nil
	}
	out := make([]v1.Secret, len(in))
	for i, s := range in {
		out[i] = v1.Secret{Name: s.Name, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, UsedBy: s.UsedBy}
	}
	return out
}
