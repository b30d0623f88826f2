package netpolicy

import (
	"strings"
	"testing"
)

// TestRefusedAddresses: only public unicast passes, whatever the spelling; IPv4 carried
// in IPv6 (mapped, NAT64, 6to4) and the denied networks are refused.
func TestRefusedAddresses(t *testing.T) {
	cases := []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"93.184.216.34", true},
		{"100.63.255.255", true},
		{"100.128.0.0", true},
		{"172.32.0.1", true},
		{"2606:4700:4700::1111", true},
		{"2a00:1450:4001:80b::200e", true},
		{"::ffff:8.8.8.8", false}, // written as 8.8.8.8 or not at all
		{"64:ff9b::a9fe:a9fe", false},
		{"64:ff9b::a00:1", false},
		{"2002:7f00:1::1", false},
		{"198.18.0.1", false},
		{"240.0.0.1", false},
		{"fe80::1%eth0", false},
		{"203.0.113.77", false}, // the hub API server, denied
		{"203.0.113.78", true},

		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"::1", false},
		{"10.0.0.1", false},
		{"10.255.255.255", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		{"100.64.0.0", false},
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		{"169.254.169.254", false},
		{"fe80::1", false},
		{"fc00::1", false},
		{"fd12:3456:789a::1", false},
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"ff02::1", false},
		{"ff0e::1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"255.255.255.255", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"::ffff:100.64.0.1", false},
	}
	for _, c := range cases {
		why := Refused(c.addr, HubAPIServerDenied("https://203.0.113.77:6443"))
		if (why == "") != c.want {
			t.Errorf("Refused(%s) = %q, want refused %t", c.addr, why, !c.want)
		}
		if why != "" && !strings.Contains(why, c.addr) {
			t.Errorf("Refused(%s) = %q: the address is not named", c.addr, why)
		}
	}
	if Refused("", nil) == "" {
		t.Error("Refused of no address passes")
	}
}

func TestHubAPIServerDenied(t *testing.T) {
	for host, want := range map[string]string{
		"https://203.0.113.77:6443": "203.0.113.77/32",
		"203.0.113.77:6443":         "203.0.113.77/32",
		"https://[2001:db8::7]:443": "2001:db8::7/128",
		"https://hub.example.org":   "",
		"":                          "",
	} {
		got := HubAPIServerDenied(host)
		switch {
		case want == "" && got != nil:
			t.Errorf("%q: %v, want nothing denied", host, got)
		case want != "" && (len(got) != 1 || got[0].Prefix.String() != want):
			t.Errorf("%q: %v, want %s", host, got, want)
		}
	}
}
