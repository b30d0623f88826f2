package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Listener layout of the Gateway an HTTPProxy produces.
const (
	// HTTPListenerName is the proxy Gateway's plain-HTTP listener, on HTTPPort, for
	// every hostname.
	HTTPListenerName = "http"
	// HTTPPort is the port of the HTTP listener.
	HTTPPort gatewayv1.PortNumber = 80
	// HTTPSPort is the port of the HTTPS listeners, one per hostname.
	HTTPSPort gatewayv1.PortNumber = 443

	httpsListenerPrefix = "https-"
	backendInfix        = "-backend-"
)

// CertificateName names the downstream Certificate of a Gateway's HTTPS listener and
// the Secret it writes (wire format: <gateway>-<listener>).
func CertificateName(gateway string, listener gatewayv1.SectionName) string {
	return gateway + "-" + string(listener)
}

// httpsListenerName names the HTTPS listener for hostname: "https-<hostname>", or
// "https-" and a digest when the certificate name would be too long. It depends only
// on gateway and hostname, so removing a hostname renames no other listener.
func httpsListenerName(gateway string, hostname gatewayv1.Hostname) gatewayv1.SectionName {
	readable := gatewayv1.SectionName(httpsListenerPrefix + string(hostname))
	if len(validation.IsDNS1123Subdomain(CertificateName(gateway, readable))) == 0 {
		return readable
	}
	return gatewayv1.SectionName(httpsListenerPrefix + digest(string(hostname), 16))
}

// backendServiceName names the Service of the backend of the proxy's rule at index rule:
// "<proxy>-backend-<rule>" when a valid Service name, else "backend-<digest>-<rule>".
func backendServiceName(proxy string, rule int) string {
	readable := proxy + backendInfix + strconv.Itoa(rule)
	if len(validation.IsDNS1035Label(readable)) == 0 {
		return readable
	}
	return "backend-" + digest(proxy, 12) + "-" + strconv.Itoa(rule)
}

// digest returns the first n hex digits of s's SHA-256.
func digest(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}
