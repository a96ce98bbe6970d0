package server

import (
	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/preview"
)

// This file maps the exposed-port domain types to and from their api/v1 wire form.

func toPort(p preview.Port) v1.ExposedPort {
	return v1.ExposedPort{Port: p.Port, Name: p.Name, URL: p.URL, Token: p.Token, ExposedAt: p.ExposedAt}
}

// toPorts maps a list; nil stays nil.
func toPorts(in []preview.Port) []v1.ExposedPort {
	if in == nil {
		return nil
	}
	out := make([]v1.ExposedPort, len(in))
	for i, p := range in {
		out[i] = toPort(p)
	}
	return out
}

func fromExposeRequest(r v1.ExposePortRequest) preview.ExposeRequest {
	return preview.ExposeRequest{Port: r.Port, Name: r.Name, Token: r.Token}
}
