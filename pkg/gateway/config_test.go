package gateway

import (
	"strings"
	"testing"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.GatewayClassName != DefaultGatewayClassName || c.DownstreamGatewayClassName != DefaultDownstreamGatewayClassName ||
		c.ControllerName != DefaultControllerName || c.CertificateIssuer != (IssuerRef{DefaultIssuerName, DefaultIssuerKind, DefaultIssuerGroup}) ||
		c.Workers != DefaultWorkers {
		t.Errorf("defaults: %+v", c)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("the defaults must validate: %v", err)
	}
	cases := []struct {
		reason string
		c      Config
		want   string
	}{
		{"class with upper case", Config{GatewayClassName: "Bad"}, "gateway class"},
		{"issuer kind", Config{CertificateIssuer: IssuerRef{Kind: "Vault"}}, "issuer kind"},
		{"controller name without a path", Config{ControllerName: "example.com"}, "controller name"},
		{"negative workers", Config{Workers: -1}, "workers"},
	}
	for _, tc := range cases {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error about %s", tc.reason, err, tc.want)
		}
	}
}

func TestWorkersGiven(t *testing.T) {
	if got := (Config{Workers: 1}).WithDefaults().Workers; got != 1 {
		t.Errorf("an explicit single worker became %d", got)
	}
	if err := (Config{Workers: 1}).Validate(); err != nil {
		t.Errorf("one worker must validate: %v", err)
	}
}
