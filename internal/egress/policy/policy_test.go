package policy

import (
	"context"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestCanonicalHost(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"Example.COM", "example.com"},
		{"example.com.", "example.com"},
		{"example.com:8080", "example.com"},
		{"registry.pkgs.example.net:443", "registry.pkgs.example.net"},
		{"_dmarc.example.com", "_dmarc.example.com"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"localhost", "localhost"},
		{"", ""},
		{"127.0.0.1", ""},
		{"169.254.169.254:80", ""},
		{"[::1]:443", ""},
		{"[fd00::1]", ""},
		{"2852039166", ""},
		{"0xA9FEA9FE", "0xa9fea9fe"}, // a name: it must resolve, and the floor checks the result
		{"a..b", ""},
		{"bad host", ""},
		{"evil%00.com", ""},
		{"bücher.example", ""},
	}
	for _, tt := range tests {
		got, err := CanonicalHost(tt.in)
		if tt.want == "" {
			if !errdefs.IsCode(err, errdefs.CodeEgressDenied) {
				t.Errorf("CanonicalHost(%q) = %q, %v; want EGRESS_DENIED", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("CanonicalHost(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestDefaultAndZero(t *testing.T) {
	ctx := context.Background()
	if d := (AllowPublic{}).Decide(ctx, Request{SandboxID: "a", Kind: KindTLS, Host: "example.com", Port: 443}); d.Action != Allow {
		t.Errorf("AllowPublic.Decide = %+v; want Allow", d)
	}
	if (Decision{}).Action != Deny {
		t.Error("zero Decision is not Deny")
	}
	deny := Func(func(context.Context, Request) Decision { return Decision{Reason: "no"} })
	if d := deny.Decide(ctx, Request{}); d.Action != Deny || d.Reason != "no" {
		t.Errorf("Func.Decide = %+v", d)
	}
}
