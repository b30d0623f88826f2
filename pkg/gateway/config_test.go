package gateway

import (
	"testing"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.GatewayClassName != DefaultGatewayClassName || c.DownstreamGatewayClassName != DefaultDownstreamGatewayClassName ||
		c.ControllerName != DefaultControllerName || c.CertificateIssuer != (IssuerRef{DefaultIssuerName, DefaultIssuerKind, DefaultIssuerGroup}) ||
		c.Workers != DefaultWorkers {
		t.Errorf("defaults: %+v", c)
	}
}

func TestWorkersGiven(t *testing.T) {
	if got := (Config{Workers: 1}).WithDefaults().Workers; got != 1 {
		t.Errorf("an explicit single worker became %d", got)
	}
}
