package blocked

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

// TestHostNetworksDenied: a neighbour on a network the host is directly connected to is in the
// floor, whatever range that network uses.
func TestHostNetworksDenied(t *testing.T) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	checked := 0
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() {
			continue
		}
		ones, bits := ipn.Mask.Size()
		if ones < 8 || ones > 30 || bits != 32 {
			continue
		}
		ip, _ := netip.AddrFromSlice(ipn.IP.To4())
		b := ip.As4()
		b[3] ^= 1 // a neighbour in the same network
		neighbour := netip.AddrFrom4(b)
		if !f.Denied(neighbour) {
			t.Errorf("neighbour %s on the host's network %s is not denied", neighbour, ipn)
		}
		checked++
	}
	if checked == 0 {
		t.Skip("no IPv4 interface network to check on this host")
	}
}
