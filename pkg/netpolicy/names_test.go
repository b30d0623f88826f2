package netpolicy

import (
	"strings"
	"testing"
)

// TestRefusedName: only a public DNS name passes, whatever spelling a hostile tenant
// tries; the operator's reserved domains refuse public-looking names on top.
func TestRefusedName(t *testing.T) {
	const notPublic = "is not a public DNS name"
	cases := []struct {
		host string
		want string // substring of the refusal; "" for allowed
	}{
		// Public names: under an ICANN suffix, a label more than it.
		{"origin.example.org", ""},
		{"api.example.com", ""},
		{"example.com", ""},
		{"API.Example.COM", ""},
		{"api.example.com.", ""},
		{"www.bbc.co.uk", ""},
		{"bbc.co.uk", ""},
		{"xn--bcher-kva.example.com", ""},
		{"origin.xn--p1ai", ""},         // an IDN TLD in its A-label form
		{"foo.github.io", ""},           // a private-section suffix, under ICANN's io
		{"bucket.s3.amazonaws.com", ""}, // the same
		{"svc.security", ""},            // a gTLD; an edge namespace so named is the operator's to reserve
		{"notlocalhost.example.org", ""},
		// What an edge's resolver completes into the cluster.
		{"metadata", "a single label"},
		{"kubernetes", "a single label"},
		{"METADATA.", "a single label"},
		{"kubernetes.default", `top-level domain "default" is not in the public suffix list's ICANN section`},
		{"kubernetes.default.", `top-level domain "default"`},
		{"KUBERNETES.DEFAULT", `top-level domain "default"`},
		{"kube-dns.kube-system", `top-level domain "kube-system"`},
		{"kubernetes.default.svc", `top-level domain "svc"`},
		{"kubernetes.default.svc.cluster.local", `top-level domain "local"`},
		{"a-b-c-d.default.pod", `top-level domain "pod"`},
		{"169-254-169-254.default.pod", `top-level domain "pod"`},
		{"10-0-0-1.ns.pod.cluster.local", `top-level domain "local"`},
		// Private and unlisted TLDs.
		{"db.corp", `top-level domain "corp"`},
		{"foo.internal.", `top-level domain "internal"`},
		{"metadata.google.internal", `top-level domain "internal"`},
		{"backend.demo.localhost", `top-level domain "localhost"`},
		{"localhost", "a single label"},
		{"printer.local", `top-level domain "local"`},
		{"router.lan", `top-level domain "lan"`},
		{"app.home.arpa", "arpa is the infrastructure domain"},
		{"1.0.0.127.in-addr.arpa", "arpa is the infrastructure domain"},
		{"api.example", `top-level domain "example"`},
		{"api.test", `top-level domain "test"`},
		{"api.invalid", `top-level domain "invalid"`},
		// A public suffix is not a name under one.
		{"com", "a single label"},
		{"co.uk", "the public suffix co.uk itself"},
		{"github.io", ""}, // registered under io; the private section does not make it less public
		// Spellings.
		{"a..example.com", "an empty label"},
		{"kube_dns.example.com", `the label "kube_dns"`},
		{"127.1", "reads as an IP address"},
		{"0177.0.0.1", "reads as an IP address"},
		{"0x7f.0.0.1", "reads as an IP address"},
		{"0x7f000001", "reads as an IP address"},
		{"2130706433", "reads as an IP address"},
		{"169.254.169.254", "reads as an IP address"},
		{"10.0.0.1.", "reads as an IP address"},
		{"ｌｏｃａｌｈｏｓｔ", "not ASCII"},
		{"bücher.example.com", "not ASCII"},
		{"", "no host"},
		{".", "no host"},
	}
	for _, tc := range cases {
		got := RefusedName(tc.host, nil)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("RefusedName(%q) = %q, want %q", tc.host, got, tc.want)
		}
		if got != "" && tc.want != "no host" && !strings.Contains(got, `"`+tc.host+`"`) {
			t.Errorf("RefusedName(%q) = %q: the refusal does not name the host", tc.host, got)
		}
		if strings.Contains(got, notPublic) && !strings.Contains(got, "a backend is a public DNS name") {
			t.Errorf("RefusedName(%q) = %q: the refusal does not say what is wanted", tc.host, got)
		}
	}
}

// TestRefusedNameReserved: the operator's list refuses public names in its domains,
// the most specific one named, however the host is spelled.
func TestRefusedNameReserved(t *testing.T) {
	reserved := []string{"corp.example.com", "Internal.Example.COM.", "app", ""}
	for host, want := range map[string]string{
		"db.corp.example.com":    "reserved domain corp.example.com",
		"CORP.EXAMPLE.COM.":      "reserved domain corp.example.com",
		"x.internal.example.com": "reserved domain internal.example.com",
		"web.app":                "reserved domain app",
		"origin.example.com":     "",
		"notcorp.example.com":    "",
		"kubernetes.default":     `top-level domain "default"`,
	} {
		got := RefusedName(host, reserved)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("RefusedName(%q) = %q, want %q", host, got, want)
		}
	}
}
