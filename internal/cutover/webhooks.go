package cutover

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Resource is a resource (or subresource) anchorage writes, as an admission rule names it.
type Resource struct {
	Group, Resource, Subresource string
	// Namespaced is false for a cluster-scoped resource (a rule's scope tells them apart).
	Namespaced bool
}

func (r Resource) String() string {
	s := r.Resource
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	if r.Group != "" {
		s += "." + r.Group
	}
	return s
}

// PlaneWrites are the resources anchorage writes on a project's plane: the proxies'
// status, the Gateways and HTTPRoutes they produce (and their status), the backends'
// Services, and the upstream EndpointSlices it finalizes.
var PlaneWrites = []Resource{
	{Group: "networking.datumapis.com", Resource: "httpproxies", Namespaced: true},
	{Group: "networking.datumapis.com", Resource: "httpproxies", Subresource: "status", Namespaced: true},
	{Group: "gateway.networking.k8s.io", Resource: "gateways", Namespaced: true},
	{Group: "gateway.networking.k8s.io", Resource: "gateways", Subresource: "status", Namespaced: true},
	{Group: "gateway.networking.k8s.io", Resource: "httproutes", Namespaced: true},
	{Group: "gateway.networking.k8s.io", Resource: "httproutes", Subresource: "status", Namespaced: true},
	{Group: "", Resource: "services", Namespaced: true},
	{Group: "discovery.k8s.io", Resource: "endpointslices", Namespaced: true},
}

// HubWrites are the resources anchorage writes on the hub.
var HubWrites = []Resource{
	{Group: "gateway.networking.k8s.io", Resource: "gateways", Namespaced: true},
	{Group: "gateway.networking.k8s.io", Resource: "httproutes", Namespaced: true},
	{Group: "gateway.networking.k8s.io", Resource: "backendtlspolicies", Namespaced: true},
	{Group: "", Resource: "services", Namespaced: true},
	{Group: "discovery.k8s.io", Resource: "endpointslices", Namespaced: true},
	{Group: "", Resource: "configmaps", Namespaced: true},
	{Group: "", Resource: "namespaces", Namespaced: false},
	{Group: "cert-manager.io", Resource: "certificates", Namespaced: true},
	{Group: "networking.datumapis.com", Resource: "httpproxies", Namespaced: true},
}

// webhook is what a validating and a mutating webhook share that matters here.
type webhook struct {
	name          string
	client        admissionregistrationv1.WebhookClientConfig
	rules         []admissionregistrationv1.RuleWithOperations
	failurePolicy *admissionregistrationv1.FailurePolicyType
	selective     bool // a namespace or object selector narrows it
}

// WebhookRows returns a blocked row per webhook, of the configurations given, that fails
// closed (failurePolicy Fail, or unset: Fail is the default) and whose rules cover one of
// writes: while its service is gone (the previous manager's pods stopped), the API server
// refuses every such write. project is "" for the hub.
func WebhookRows(project string, writes []Resource, validating []admissionregistrationv1.ValidatingWebhookConfiguration, mutating []admissionregistrationv1.MutatingWebhookConfiguration) []Row {
	var rows []Row
	for _, c := range validating {
		for _, w := range c.Webhooks {
			rows = append(rows, webhookRow(project, "ValidatingWebhookConfiguration", c.Name, writes, webhook{
				name: w.Name, client: w.ClientConfig, rules: w.Rules, failurePolicy: w.FailurePolicy,
				selective: narrows(w.NamespaceSelector) || narrows(w.ObjectSelector),
			})...)
		}
	}
	for _, c := range mutating {
		for _, w := range c.Webhooks {
			rows = append(rows, webhookRow(project, "MutatingWebhookConfiguration", c.Name, writes, webhook{
				name: w.Name, client: w.ClientConfig, rules: w.Rules, failurePolicy: w.FailurePolicy,
				selective: narrows(w.NamespaceSelector) || narrows(w.ObjectSelector),
			})...)
		}
	}
	return rows
}

// narrows is true when a webhook's selector selects less than everything.
func narrows(s *metav1.LabelSelector) bool {
	return s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0)
}

func webhookRow(project, kind, config string, writes []Resource, w webhook) []Row {
	policy := "Fail"
	if w.failurePolicy != nil {
		policy = string(*w.failurePolicy)
	}
	if policy != string(admissionregistrationv1.Fail) {
		return nil
	}
	covered := CoveredBy(w.rules, writes)
	if len(covered) == 0 {
		return nil
	}
	names := make([]string, len(covered))
	for i, r := range covered {
		names[i] = r.String()
	}
	failure := "failurePolicy Fail"
	if w.failurePolicy == nil {
		failure = "failurePolicy unset, so Fail"
	}
	narrowed := ""
	if w.selective {
		narrowed = " (a namespace or object selector narrows it: it may not see every object anchorage writes)"
	}
	return []Row{{
		Verdict: Blocked, Project: project, Kind: kind, Name: config,
		Detail: fmt.Sprintf("webhook %s (%s) fails closed (%s) on %s%s, which anchorage writes: remove it after the previous manager's pods are gone, before anchorage starts",
			w.name, clientOf(w.client), failure, strings.Join(names, ", "), narrowed),
	}}
}

// clientOf says where the API server calls a webhook.
func clientOf(c admissionregistrationv1.WebhookClientConfig) string {
	if s := c.Service; s != nil {
		where := "service " + s.Namespace + "/" + s.Name
		if s.Port != nil {
			where += fmt.Sprintf(":%d", *s.Port)
		}
		if s.Path != nil {
			where += *s.Path
		}
		return where
	}
	if c.URL != nil {
		return "url " + *c.URL
	}
	return "no client configured"
}

// CoveredBy returns the resources of writes that one of rules covers, in the order of
// writes. A rule covers a resource when one of its operations is CREATE, UPDATE, DELETE
// or "*"; its apiGroups hold the resource's group or "*"; its scope (unset or "*": any)
// admits the resource's; and one of its resources matches as the API server matches
// them: "name" the resource itself, "*" every resource, "name/sub" and "*/sub" that
// subresource, "name/*" and "*/*" the resource and all its subresources. API versions
// are not compared: any version of a covered resource is a write refused.
func CoveredBy(rules []admissionregistrationv1.RuleWithOperations, writes []Resource) []Resource {
	var out []Resource
	for _, r := range writes {
		for _, rule := range rules {
			if ruleCovers(rule, r) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

func ruleCovers(rule admissionregistrationv1.RuleWithOperations, r Resource) bool {
	ops := false
	for _, op := range rule.Operations {
		switch op {
		case admissionregistrationv1.OperationAll, admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete:
			ops = true
		}
	}
	if !ops {
		return false
	}
	group := false
	for _, g := range rule.APIGroups {
		if g == "*" || g == r.Group {
			group = true
		}
	}
	if !group {
		return false
	}
	if s := rule.Scope; s != nil {
		switch *s {
		case admissionregistrationv1.ClusterScope:
			if r.Namespaced {
				return false
			}
		case admissionregistrationv1.NamespacedScope:
			if !r.Namespaced {
				return false
			}
		}
	}
	for _, entry := range rule.Resources {
		res, sub, _ := strings.Cut(entry, "/")
		if (res == "*" || res == r.Resource) && (sub == "*" || sub == r.Subresource) {
			return true
		}
	}
	return false
}
