package v1alpha_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/api/v1alpha"
)

// The proxies below are written in the shape the previous manager stored them, as JSON
// and through unstructured objects, so that neither our Go type nor our client can drop
// a field on the way in. Every value the API server would default is spelled out, so a
// proxy reads back exactly as written unless the schema pruned or rewrote something.

// previousMatches is a rule's worth of matches (the previous manager's maximum of 64),
// cycling through path match types, methods, headers and query parameters.
func previousMatches() string {
	var ms []string
	for i := range 64 {
		switch i % 4 {
		case 0:
			ms = append(ms, fmt.Sprintf(`{"path": {"type": "Exact", "value": "/catalog/item-%d"}}`, i))
		case 1:
			ms = append(ms, fmt.Sprintf(`{"path": {"type": "PathPrefix", "value": "/catalog/section-%d"}, "method": "GET"}`, i))
		case 2:
			ms = append(ms, fmt.Sprintf(`{"path": {"type": "RegularExpression", "value": "/catalog/[a-z]+-%d"},
				"headers": [{"type": "Exact", "name": "X-Shard", "value": "%d"}]}`, i, i))
		default:
			ms = append(ms, fmt.Sprintf(`{"path": {"type": "PathPrefix", "value": "/catalog/q-%d"},
				"queryParams": [{"type": "Exact", "name": "page", "value": "%d"}]}`, i, i))
		}
	}
	return "[" + strings.Join(ms, ",\n") + "]"
}

// endpointsSpec has the endpoint backend kinds: plain http, https to an IP address with
// tls.hostname, a rewrite and a redirect, filters at rule and backend level, one rule
// of 64 matches and an IP address hostname (which the previous manager's webhook let
// through).
func endpointsSpec() string {
	return `{
	"hostnames": ["shop.example.com", "www.shop.example.com", "192.0.2.10"],
	"rules": [
		{
			"name": "catalog",
			"matches": ` + previousMatches() + `,
			"filters": [
				{"type": "RequestHeaderModifier", "requestHeaderModifier": {
					"set": [{"name": "X-Env", "value": "prod"}],
					"add": [{"name": "X-Trace", "value": "on"}],
					"remove": ["X-Debug"]}},
				{"type": "ResponseHeaderModifier", "responseHeaderModifier": {
					"add": [{"name": "Cache-Control", "value": "no-store"}]}}
			],
			"backends": [{
				"endpoint": "http://origin.shop.example.com:8080",
				"filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
					"set": [{"name": "X-Backend", "value": "origin"}]}}]
			}]
		},
		{
			"name": "secure",
			"matches": [{"path": {"type": "PathPrefix", "value": "/secure"}}],
			"backends": [{"endpoint": "https://192.0.2.20:8443", "tls": {"hostname": "origin.shop.example.com"}}]
		},
		{
			"name": "api",
			"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
			"filters": [{"type": "URLRewrite", "urlRewrite": {
				"hostname": "api.shop.example.com",
				"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}}],
			"backends": [{"endpoint": "https://api.shop.example.com"}]
		},
		{
			"name": "old-paths",
			"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
			"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]
		}
	]
}`
}

// tunnelsSpec has the backend kinds this manager does not program: an endpoint reached
// through a connector, and an instance.
func tunnelsSpec() string {
	return `{
	"hostnames": ["office.example.org"],
	"rules": [
		{
			"name": "via-connector",
			"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
			"backends": [{"endpoint": "http://localhost:3000", "connector": {"name": "office-connector"}}]
		},
		{
			"name": "pod",
			"matches": [{
				"path": {"type": "Exact", "value": "/pod"},
				"method": "POST",
				"headers": [{"type": "Exact", "name": "X-Tenant", "value": "acme"}],
				"queryParams": [{"type": "Exact", "name": "debug", "value": "1"}]
			}],
			"backends": [{
				"instance": {"name": "web-7f9c-abcde", "port": 8080},
				"filters": [{"type": "ResponseHeaderModifier", "responseHeaderModifier": {
					"set": [{"name": "X-Served-By", "value": "pod"}]}}]
			}]
		}
	]
}`
}

// previousCondition is one condition as the previous manager wrote it.
func previousCondition(typ, status, reason string) string {
	return fmt.Sprintf(`{"type": %q, "status": %q, "reason": %q, "message": "observed by the previous manager",
		"lastTransitionTime": "2026-03-04T05:06:07Z", "observedGeneration": 1}`, typ, status, reason)
}

// previousStatus is a full status of the previous manager's: nine conditions (more than
// a capped list would hold), addresses, three hostnames, the canonical hostname and a
// per-hostname status for each of hosts.
func previousStatus(canonical string, hosts []string) string {
	conditions := []string{
		previousCondition("Accepted", "True", "Accepted"),
		previousCondition("Programmed", "True", "Programmed"),
		previousCondition("HostnamesVerified", "True", "HostnamesVerified"),
		previousCondition("HostnamesInUse", "False", "HostnameInUse"),
		previousCondition("ConnectorMetadataProgrammed", "True", "ConnectorMetadataApplied"),
		previousCondition("CertificatesReady", "True", "AllCertificatesReady"),
		previousCondition("DNSRecordsProgrammed", "True", "AllApplicableRecordsCreated"),
		// The previous manager defined the seven types above; other writers may have
		// added theirs, which its uncapped list accepted.
		previousCondition("ResolvedRefs", "True", "ResolvedRefs"),
		previousCondition("policy.example.com/Attached", "True", "Attached"),
	}
	var hostnameStatuses []string
	for _, h := range hosts {
		hostnameStatuses = append(hostnameStatuses, fmt.Sprintf(`{"hostname": %q, "conditions": [%s]}`, h, strings.Join([]string{
			previousCondition("Verified", "True", "Verified"),
			previousCondition("DNSRecordProgrammed", "True", "RecordCreated"),
			previousCondition("Available", "True", "Claimed"),
			previousCondition("CertificateReady", "True", "CertificateIssued"),
		}, ", ")))
	}
	statusHostnames, _ := json.Marshal([]string{hosts[0], "www.example.net", canonical})
	return fmt.Sprintf(`{
	"conditions": [%s],
	"addresses": [{"type": "IPAddress", "value": "192.0.2.1"}, {"type": "Hostname", "value": %q}],
	"hostnames": %s,
	"canonicalHostname": %q,
	"hostnameStatuses": [%s]
}`, strings.Join(conditions, ",\n"), canonical, statusHostnames, canonical, strings.Join(hostnameStatuses, ",\n"))
}

// TestPreviousManagersProxiesReadBackWhole stores proxies written by the previous
// manager and checks that the schema neither refuses nor prunes any of their spec or
// status, and that our Go type carries every field through a decode, an encode and a
// status update of its own.
func TestPreviousManagersProxiesReadBackWhole(t *testing.T) {
	c := requireAPIServer(t)
	for _, tc := range []struct {
		name, spec, status string
	}{
		{
			name:   "previous-endpoints",
			spec:   endpointsSpec(),
			status: previousStatus("3f2a9c1e.datumproxy.net", []string{"shop.example.com", "www.shop.example.com", "192.0.2.10"}),
		},
		{
			name:   "previous-tunnels",
			spec:   tunnelsSpec(),
			status: previousStatus("7b1d04aa.datumproxy.net", []string{"office.example.org"}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			wantSpec, wantStatus := decodeJSON(t, tc.spec), decodeJSON(t, tc.status)

			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha.GroupVersion.String(),
				"kind":       "HTTPProxy",
				"metadata":   map[string]any{"namespace": "default", "name": tc.name},
				"spec":       wantSpec,
			}}
			g.Expect(c.Create(ctx, u)).To(Succeed(), "the API server refused the previous manager's spec")
			t.Cleanup(func() { _ = c.Delete(context.Background(), u) })
			u.Object["status"] = decodeJSON(t, tc.status)
			g.Expect(c.Status().Update(ctx, u)).To(Succeed(), "the API server refused the previous manager's status")

			t.Run("raw", func(t *testing.T) {
				got := getRaw(t, c, tc.name)
				expectJSONEqual(t, "spec", wantSpec, got.Object["spec"])
				expectJSONEqual(t, "status", wantStatus, got.Object["status"])
			})

			t.Run("typed", func(t *testing.T) {
				g := NewWithT(t)
				raw := getRaw(t, c, tc.name)
				b, err := json.Marshal(raw.Object)
				g.Expect(err).NotTo(HaveOccurred())
				var typed v1alpha.HTTPProxy
				g.Expect(json.Unmarshal(b, &typed)).To(Succeed())
				expectJSONEqual(t, "spec through the Go type", wantSpec, typed.Spec)
				expectJSONEqual(t, "status through the Go type", wantStatus, typed.Status)

				// Our own status write of the decoded object keeps everything too.
				g.Expect(c.Status().Update(ctx, &typed)).To(Succeed())
				after := getRaw(t, c, tc.name)
				expectJSONEqual(t, "spec after a typed status update", wantSpec, after.Object["spec"])
				expectJSONEqual(t, "status after a typed status update", wantStatus, after.Object["status"])
			})
		})
	}
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("fixture is not JSON: %v\n%s", err, s)
	}
	return v
}

func getRaw(t *testing.T, c client.Client, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v1alpha.GroupVersion.String())
	u.SetKind("HTTPProxy")
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, u); err != nil {
		t.Fatalf("reading %s back: %v", name, err)
	}
	return u
}

// expectJSONEqual compares two values as JSON documents: each is encoded and decoded
// again, so Go types, unstructured maps and number representations compare alike.
func expectJSONEqual(t *testing.T, what string, want, got any) {
	t.Helper()
	normal := func(v any) any {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: encoding: %v", what, err)
		}
		var out any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: decoding: %v", what, err)
		}
		return out
	}
	if diff := cmp.Diff(normal(want), normal(got)); diff != "" {
		t.Errorf("%s differs from what the previous manager wrote (-written +read):\n%s", what, diff)
	}
}
