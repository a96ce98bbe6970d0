package floor

import (
	"net"
	"net/netip"
	"testing"
)

func TestDenied(t *testing.T) {
	f := New(netip.MustParsePrefix("198.51.100.0/24"))
	tests := []struct {
		ip   string
		want bool
	}{
		{"127.0.0.1", true},
		{"10.88.0.1", true},
		{"172.16.5.4", true},
		{"192.168.1.1", true},
		{"169.254.169.254", true},
		{"100.64.0.1", true},
		{"0.0.0.0", true},
		{"224.0.0.251", true},
		{"255.255.255.255", true},
		{"::1", true},
		{"::", true},
		{"fd00:ec2::254", true},
		{"fe80::1", true},
		{"::ffff:169.254.169.254", true},
		{"64:ff9b::a9fe:a9fe", true},    // NAT64 of 169.254.169.254
		{"2002:7f00:0001::", true},      // 6to4 of 127.0.0.1
		{"198.51.100.7", true},          // extra
		{"203.0.113.80", false},         // documentation range: allowed
		{"8.8.8.8", false},              // public
		{"::ffff:8.8.8.8", false},       // mapped public
		{"2606:4700:4700::1111", false}, // public v6
	}
	for _, tt := range tests {
		if got := f.Denied(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("Denied(%s) = %v; want %v", tt.ip, got, tt.want)
		}
	}
	if !f.Denied(netip.Addr{}) {
		t.Error("Denied(invalid) = false; want true")
	}
}

func TestDeniedHostAddresses(t *testing.T) {
	f := New()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(ipn.IP)
		if !f.Denied(ip) {
			t.Errorf("Denied(host address %s) = false; want true", ip)
		}
	}
}

func TestDeniedName(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"metadata", true}, {"Metadata.Google.Internal.", true}, {"example.com", false},
	} {
		if got := DeniedName(tt.name); got != tt.want {
			t.Errorf("DeniedName(%q) = %v; want %v", tt.name, got, tt.want)
		}
	}
}
