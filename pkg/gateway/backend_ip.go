package gateway

import (
	"net/netip"

	"anchorage/pkg/netpolicy"
)

// isIPLiteral reports whether host, as url.Hostname gives it, is an IP address to judge
// with netpolicy.Refused rather than a DNS name: what netip parses, zones included.
func isIPLiteral(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// refusedEndpointHost returns why the host of a proxy backend's endpoint URL may not be
// programmed, or "": an IP address by netpolicy.Refused, any other host by
// refusedBackendHost (which refuses IP addresses in other spellings).
func refusedEndpointHost(host string, reserved []string, denied []netpolicy.DeniedNetwork) string {
	if isIPLiteral(host) {
		return netpolicy.Refused(host, denied)
	}
	return refusedBackendHost(host, reserved)
}
