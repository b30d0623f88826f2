package cutover

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func rule(groups, resources []string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
	if len(ops) == 0 {
		ops = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	}
	return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
		APIGroups: groups, APIVersions: []string{"v1"}, Resources: resources,
	}}
}

func scoped(r admissionregistrationv1.RuleWithOperations, s admissionregistrationv1.ScopeType) admissionregistrationv1.RuleWithOperations {
	r.Scope = &s
	return r
}

func TestCoveredBy(t *testing.T) {
	gw := "gateway.networking.k8s.io"
	cases := []struct {
		name   string
		rule   admissionregistrationv1.RuleWithOperations
		writes []Resource
		want   []string
	}{
		{"exact group and resource", rule([]string{gw}, []string{"gateways"}), PlaneWrites, []string{"gateways." + gw}},
		{"another group", rule([]string{"gateway.envoyproxy.io"}, []string{"gateways"}), PlaneWrites, nil},
		{"another resource of the group", rule([]string{gw}, []string{"grpcroutes"}), PlaneWrites, nil},
		{"* groups", rule([]string{"*"}, []string{"services"}), PlaneWrites, []string{"services"}},
		{"* resources: every resource of the group, no subresource", rule([]string{gw}, []string{"*"}), PlaneWrites, []string{"gateways." + gw, "httproutes." + gw}},
		{"*/*: resources and subresources", rule([]string{gw}, []string{"*/*"}), PlaneWrites,
			[]string{"gateways." + gw, "gateways/status." + gw, "httproutes." + gw, "httproutes/status." + gw}},
		{"name/*: the resource and its subresources", rule([]string{"networking.datumapis.com"}, []string{"httpproxies/*"}), PlaneWrites,
			[]string{"httpproxies.networking.datumapis.com", "httpproxies/status.networking.datumapis.com"}},
		{"*/status: subresources only", rule([]string{"*"}, []string{"*/status"}), PlaneWrites,
			[]string{"httpproxies/status.networking.datumapis.com", "gateways/status." + gw, "httproutes/status." + gw}},
		{"name/status is not the resource", rule([]string{gw}, []string{"gateways/status"}), PlaneWrites, []string{"gateways/status." + gw}},
		{"everything", rule([]string{"*"}, []string{"*"}, admissionregistrationv1.OperationAll), HubWrites,
			[]string{"gateways." + gw, "httproutes." + gw, "backendtlspolicies." + gw, "services", "endpointslices.discovery.k8s.io", "configmaps", "namespaces", "certificates.cert-manager.io", "httpproxies.networking.datumapis.com"}},
		{"only CONNECT: nothing written", rule([]string{"*"}, []string{"*"}, admissionregistrationv1.Connect), HubWrites, nil},
		{"DELETE alone is a write", rule([]string{""}, []string{"configmaps"}, admissionregistrationv1.Delete), HubWrites, []string{"configmaps"}},
		{"cluster scope: namespaced resources are not seen", scoped(rule([]string{""}, []string{"*"}), admissionregistrationv1.ClusterScope), HubWrites, []string{"namespaces"}},
		{"namespaced scope: namespaces are not seen", scoped(rule([]string{""}, []string{"*"}), admissionregistrationv1.NamespacedScope), HubWrites, []string{"services", "configmaps"}},
		{"* scope: all", scoped(rule([]string{""}, []string{"namespaces"}), admissionregistrationv1.AllScopes), HubWrites, []string{"namespaces"}},
		{"the previous manager's Domain webhook", rule([]string{"networking.datumapis.com"}, []string{"domains"}, admissionregistrationv1.Create, admissionregistrationv1.Delete), PlaneWrites, nil},
	}
	for _, tc := range cases {
		var got []string
		for _, r := range CoveredBy([]admissionregistrationv1.RuleWithOperations{tc.rule}, tc.writes) {
			got = append(got, r.String())
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: covered %q, want %q", tc.name, got, tc.want)
		}
	}
}

// previousManagersWebhooks are network-services-operator's webhook configurations as
// `kubectl kustomize config/default` renders them.
func previousManagersWebhooks() ([]admissionregistrationv1.ValidatingWebhookConfiguration, []admissionregistrationv1.MutatingWebhookConfiguration) {
	svc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: "network-services-operator-system", Name: "network-services-operator-webhook-service", Path: ptr.To(path), Port: ptr.To[int32](443)}}
	}
	fail := ptr.To(admissionregistrationv1.Fail)
	v := func(name, path, group, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: svc(path), FailurePolicy: fail, Rules: []admissionregistrationv1.RuleWithOperations{rule([]string{group}, []string{resource}, ops...)}}
	}
	validating := admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "network-services-operator-validating-webhook-configuration"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			v("vbackendtlspolicy-v1.kb.io", "/validate-gateway-networking-k8s-io-v1-backendtlspolicy", "gateway.networking.k8s.io", "backendtlspolicies"),
			v("vgateway-v1.kb.io", "/validate-gateway-networking-k8s-io-v1-gateway", "gateway.networking.k8s.io", "gateways"),
			v("vhttproute-v1.kb.io", "/validate-gateway-networking-k8s-io-v1-httproute", "gateway.networking.k8s.io", "httproutes"),
			v("vdomain-v1alpha.kb.io", "/validate-networking-datumapis-com-v1alpha-domain", "networking.datumapis.com", "domains", admissionregistrationv1.Create, admissionregistrationv1.Delete),
			v("vhttpproxy-v1alpha.kb.io", "/validate-networking-datumapis-com-v1alpha-httpproxy", "networking.datumapis.com", "httpproxies"),
			v("vbackend-v1alpha1.kb.io", "/validate-gateway-envoyproxy-io-v1alpha1-backend", "gateway.envoyproxy.io", "backends"),
		},
	}
	mutating := admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "network-services-operator-mutating-webhook-configuration"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mgateway-v1.kb.io", ClientConfig: svc("/mutate-gateway-networking-k8s-io-v1-gateway"), FailurePolicy: fail,
			Rules: []admissionregistrationv1.RuleWithOperations{rule([]string{"gateway.networking.k8s.io"}, []string{"gateways"})},
		}},
	}
	return []admissionregistrationv1.ValidatingWebhookConfiguration{validating}, []admissionregistrationv1.MutatingWebhookConfiguration{mutating}
}

func TestWebhookRowsOfThePreviousManager(t *testing.T) {
	validating, mutating := previousManagersWebhooks()
	webhooksOf := func(rows []Row) []string {
		var out []string
		for _, r := range rows {
			if r.Verdict != Blocked {
				t.Errorf("%+v: want blocked", r)
			}
			out = append(out, r.Kind+" "+strings.Fields(r.Detail)[1])
		}
		return out
	}
	plane := webhooksOf(WebhookRows("acme", PlaneWrites, validating, mutating))
	want := []string{
		"ValidatingWebhookConfiguration vgateway-v1.kb.io", "ValidatingWebhookConfiguration vhttproute-v1.kb.io",
		"ValidatingWebhookConfiguration vhttpproxy-v1alpha.kb.io", "MutatingWebhookConfiguration mgateway-v1.kb.io",
	}
	if strings.Join(plane, ", ") != strings.Join(want, ", ") {
		t.Errorf("on a plane: %q, want %q", plane, want)
	}
	hub := webhooksOf(WebhookRows("", HubWrites, validating, mutating))
	want = append([]string{"ValidatingWebhookConfiguration vbackendtlspolicy-v1.kb.io"}, want...)
	if strings.Join(hub, ", ") != strings.Join(want, ", ") {
		t.Errorf("on the hub: %q, want %q", hub, want)
	}

	rows := WebhookRows("acme", PlaneWrites, validating, mutating)
	r := rows[0]
	if r.Project != "acme" || r.Name != "network-services-operator-validating-webhook-configuration" || r.Namespace != "" {
		t.Errorf("row %+v: want project acme, the configuration's name", r)
	}
	for _, s := range []string{"vgateway-v1.kb.io", "service network-services-operator-system/network-services-operator-webhook-service:443/validate-gateway-networking-k8s-io-v1-gateway",
		"gateways.gateway.networking.k8s.io", "remove it after the previous manager's pods are gone, before anchorage starts"} {
		if !strings.Contains(r.Detail, s) {
			t.Errorf("detail %q does not say %q", r.Detail, s)
		}
	}
}

func TestWebhookRowsFailurePolicy(t *testing.T) {
	covering := []admissionregistrationv1.RuleWithOperations{rule([]string{"*"}, []string{"*"})}
	cfg := func(policy *admissionregistrationv1.FailurePolicyType, sel *metav1.LabelSelector, rules []admissionregistrationv1.RuleWithOperations) []admissionregistrationv1.ValidatingWebhookConfiguration {
		return []admissionregistrationv1.ValidatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "w.example.com", FailurePolicy: policy, Rules: rules, ObjectSelector: sel,
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://hooks.example.com/validate")}}},
		}}
	}
	cases := []struct {
		name        string
		policy      *admissionregistrationv1.FailurePolicyType
		sel         *metav1.LabelSelector
		rules       []admissionregistrationv1.RuleWithOperations
		wantBlocked bool
		wantDetail  []string
	}{
		{"Fail", ptr.To(admissionregistrationv1.Fail), nil, covering, true, []string{"failurePolicy Fail", "url https://hooks.example.com/validate"}},
		{"unset is Fail", nil, nil, covering, true, []string{"failurePolicy unset, so Fail"}},
		{"Ignore is not blocked", ptr.To(admissionregistrationv1.Ignore), nil, covering, false, nil},
		{"Fail on what anchorage does not write", ptr.To(admissionregistrationv1.Fail), nil,
			[]admissionregistrationv1.RuleWithOperations{rule([]string{"apps"}, []string{"deployments"})}, false, nil},
		{"an empty selector selects everything", nil, &metav1.LabelSelector{}, covering, true, nil},
		{"a selector is said to narrow it", nil, &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, covering, true, []string{"selector narrows it"}},
	}
	for _, tc := range cases {
		rows := WebhookRows("", HubWrites, cfg(tc.policy, tc.sel, tc.rules), nil)
		if (len(rows) == 1) != tc.wantBlocked || len(rows) > 1 {
			t.Errorf("%s: rows %+v, want blocked %t", tc.name, rows, tc.wantBlocked)
			continue
		}
		for _, s := range tc.wantDetail {
			if !strings.Contains(rows[0].Detail, s) {
				t.Errorf("%s: detail %q does not say %q", tc.name, rows[0].Detail, s)
			}
		}
		if tc.sel != nil && len(tc.sel.MatchLabels) == 0 && strings.Contains(rows[0].Detail, "narrows") {
			t.Errorf("%s: detail %q says an empty selector narrows", tc.name, rows[0].Detail)
		}
	}
}
