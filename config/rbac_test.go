package config_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/internal/app"
	"anchorage/pkg/anchor/resync"
)

// managerSA is the hub identity config/default binds its roles to.
var managerSA = "system:serviceaccount:" + deployNamespace + ":anchorage-manager"

// access is one request a SubjectAccessReview asks about.
type access struct {
	verb, group, resource, subresource, namespace string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	return fmt.Sprintf("%s %s %s", a.verb, r, where)
}

// each expands verbs over one resource.
func each(group, resource, namespace string, verbs ...string) []access {
	var out []access
	for _, v := range verbs {
		out = append(out, access{verb: v, group: group, resource: resource, namespace: namespace})
	}
	return out
}

// applyRenamed creates the rendered RBAC objects for real, their names suffixed so they
// never collide with the dry-run of config/default in another test; the subjects and
// rules, which are what a SubjectAccessReview reads, are untouched.
func applyRenamed(t *testing.T, c client.Client, objs []client.Object, suffix string) {
	t.Helper()
	for _, o := range objs {
		o.SetName(o.GetName() + suffix)
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			b.RoleRef.Name += suffix
		case *rbacv1.RoleBinding:
			b.RoleRef.Name += suffix
		}
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// hubRBAC returns config/default's RBAC objects, typed.
func hubRBAC(t *testing.T) []client.Object {
	t.Helper()
	var out []client.Object
	for _, u := range render(t, configDir("default")) {
		var o client.Object
		switch u.GetKind() {
		case "ClusterRole":
			o = &rbacv1.ClusterRole{}
		case "Role":
			o = &rbacv1.Role{}
		case "ClusterRoleBinding":
			o = &rbacv1.ClusterRoleBinding{}
		case "RoleBinding":
			o = &rbacv1.RoleBinding{}
		default:
			continue
		}
		decode(t, u, o)
		out = append(out, o)
	}
	return out
}

// allowed asks the API server whether user (in groups) may do a.
func allowed(t *testing.T, c client.Client, user string, groups []string, a access) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
		},
	}}
	if err := c.Create(context.Background(), sar); err != nil {
		t.Fatalf("SubjectAccessReview %s: %v", a, err)
	}
	return sar.Status.Allowed
}

// TestGeneratedRBACOnAnAPIServer applies the hub's roles (config/default, bound to the
// manager's ServiceAccount) and the plane's role (config/rbac/project-role.yaml, bound
// to a plane user) to a real API server and asks it, with SubjectAccessReviews, what
// each identity may do: no Secret outside the provider namespace on the hub, no Secret
// at all on a plane, and everything the protocol, the gateway path, the resync and the
// metrics endpoint need.
func TestGeneratedRBACOnAnAPIServer(t *testing.T) {
	needAPIServer(t)
	g := NewWithT(t)
	ctx := context.Background()
	c, err := client.New(hubConfig, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	suffix := "-sar-" + rand.String(4)
	applyRenamed(t, c, hubRBAC(t), suffix)

	planeUser := "anchorage-project-" + rand.String(4)
	var plane []client.Object
	for _, cr := range projectRoles(t) {
		plane = append(plane, cr.DeepCopy(), &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: planeUser}},
		})
	}
	applyRenamed(t, c, plane, suffix)

	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + deployNamespace, "system:authenticated"}
	mapped := "ns-" + uuidLike()
	gw, certs := "gateway.networking.k8s.io", "cert-manager.io"

	hubMust := []access{}
	hubMust = append(hubMust, each("", "secrets", deployNamespace, "get", "list", "watch")...)
	hubMust = append(hubMust, each("coordination.k8s.io", "leases", deployNamespace, "get", "list", "watch", "create", "update", "patch", "delete")...)
	hubMust = append(hubMust, each("", "configmaps", "", "get", "list", "watch", "create", "update", "delete")...)
	hubMust = append(hubMust, each("", "namespaces", "", "get", "create", "patch")...)
	// Downstream Gateways and HTTPRoutes are written whole (Update) and never carry our
	// status or finalizers on the hub: those belong to the upstream objects, on the planes.
	for _, r := range []string{"gateways", "httproutes"} {
		hubMust = append(hubMust, each(gw, r, mapped, "get", "list", "watch", "create", "update", "delete")...)
	}
	hubMust = append(hubMust, each(certs, "certificates", mapped, "get", "list", "create", "update", "delete")...)
	// What an edge resolves a backend through: written whole, like the routes.
	hubMust = append(hubMust, each("", "services", mapped, "get", "list", "watch", "create", "update", "delete")...)
	hubMust = append(hubMust, each("discovery.k8s.io", "endpointslices", mapped, "get", "list", "watch", "create", "update", "delete")...)
	hubMust = append(hubMust, each(gw, "backendtlspolicies", mapped, "get", "list", "watch", "create", "update", "delete")...)
	hubMust = append(hubMust, each("", "events", mapped, "create", "patch")...)
	hubMust = append(hubMust, each("events.k8s.io", "events", mapped, "create", "patch")...)
	hubMust = append(hubMust, each("authentication.k8s.io", "tokenreviews", "", "create")...)
	hubMust = append(hubMust, each("authorization.k8s.io", "subjectaccessreviews", "", "create")...)
	// sweep --cut-over-check lists the webhook configurations on the hub and on each plane.
	webhookConfigs := []access{
		{verb: "list", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations"},
		{verb: "list", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations"},
	}
	hubMust = append(hubMust, webhookConfigs...)
	for _, gk := range resync.DependentKindsOf(resync.DefaultHubWrites, nil) {
		hubMust = append(hubMust, access{verb: "list", group: gk.Group, resource: resourceOf(gk), namespace: mapped})
	}
	hubMustNot := []access{}
	for _, ns := range []string{"", "default", "kube-system", mapped, "other-tenant"} {
		hubMustNot = append(hubMustNot, each("", "secrets", ns, "get", "list", "watch")...)
	}
	hubMustNot = append(hubMustNot,
		access{verb: "create", resource: "secrets", namespace: deployNamespace},
		access{verb: "update", resource: "secrets", namespace: deployNamespace},
		access{verb: "list", group: "apps", resource: "deployments", namespace: mapped},
		access{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"},
		access{verb: "escalate", group: rbacv1.GroupName, resource: "clusterroles"},
		access{verb: "impersonate", resource: "users"},
		// The project planes' kinds are the plane role's, not the hub's.
		access{verb: "get", group: "networking.datumapis.com", resource: "httpproxies", namespace: mapped},
		// The cut-over check only lists webhook configurations.
		access{verb: "delete", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations"},
		access{verb: "update", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations"},
		// Backend objects are written whole; nothing of theirs is patched or has status.
		access{verb: "patch", resource: "services", namespace: mapped},
		access{verb: "update", resource: "services", subresource: "status", namespace: mapped},
	)

	planeMust := []access{}
	planeMust = append(planeMust, each("networking.datumapis.com", "httpproxies", "web", "get", "list", "watch", "patch")...)
	planeMust = append(planeMust,
		access{verb: "patch", group: "networking.datumapis.com", resource: "httpproxies", subresource: "status", namespace: "web"},
		access{verb: "update", group: "networking.datumapis.com", resource: "httpproxies", subresource: "finalizers", namespace: "web"})
	for _, r := range []string{"gateways", "httproutes"} {
		planeMust = append(planeMust, each(gw, r, "web", "get", "list", "watch", "create", "update", "patch", "delete")...)
		planeMust = append(planeMust, access{verb: "patch", group: gw, resource: r, subresource: "status", namespace: "web"})
		planeMust = append(planeMust, access{verb: "update", group: gw, resource: r, subresource: "finalizers", namespace: "web"})
	}
	planeMust = append(planeMust, each("", "services", "web", "get", "list", "watch", "create", "update", "delete")...)
	// A backend named by an IP address is an EndpointSlice; the previous manager's carry its finalizer.
	planeMust = append(planeMust, each("discovery.k8s.io", "endpointslices", "web", "get", "list", "watch", "create", "update", "patch", "delete")...)
	planeMust = append(planeMust, each("", "namespaces", "", "get")...)
	planeMust = append(planeMust, each("events.k8s.io", "events", "web", "create", "patch")...)
	planeMust = append(planeMust, webhookConfigs...)
	for _, gk := range resync.DefaultLiveOwnerKinds {
		planeMust = append(planeMust, access{verb: "get", group: gk.Group, resource: resourceOf(gk), namespace: "web"})
	}
	planeMustNot := []access{}
	for _, ns := range []string{"", "default", "kube-system", "web"} {
		planeMustNot = append(planeMustNot, each("", "secrets", ns, "get", "list", "watch")...)
	}
	planeMustNot = append(planeMustNot,
		access{verb: "list", resource: "configmaps", namespace: "web"},
		access{verb: "list", resource: "namespaces"},
		access{verb: "delete", resource: "namespaces"},
		access{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "web"},
		// The check reads webhook configurations; nothing may change them.
		access{verb: "delete", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations"},
		access{verb: "get", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations"},
	)

	for _, tc := range []struct {
		who     string
		user    string
		groups  []string
		must    []access
		mustNot []access
	}{
		{"the manager on the hub", managerSA, saGroups, hubMust, hubMustNot},
		{"the manager on a plane", planeUser, []string{"system:authenticated"}, planeMust, planeMustNot},
	} {
		for _, a := range tc.must {
			if !allowed(t, c, tc.user, tc.groups, a) {
				t.Errorf("%s may not %s; it needs to", tc.who, a)
			}
		}
		for _, a := range tc.mustNot {
			if allowed(t, c, tc.user, tc.groups, a) {
				t.Errorf("%s may %s; it must not", tc.who, a)
			}
		}
	}
}

// uuidLike is a fixed, well-formed UUID for a mapped namespace's name.
func uuidLike() string { return "3f2c8a1e-6b4d-4c9a-9e21-5d7f0b8c1a2e" }

// TestMetricsNeedAnAuthorizedToken runs a replica against the API server with secure
// metrics (the default) and scrapes it: without a token it is refused (401), with the
// token of a ServiceAccount not bound to the scraper role too (403), and with the token
// of one bound to config/rbac's anchorage-metrics-reader it gets the metrics. The API
// server does the TokenReview and the SubjectAccessReview.
func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	needAPIServer(t)
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.New(hubConfig, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(hubConfig)
	g.Expect(err).NotTo(HaveOccurred())

	ns := "scrapers-" + rand.String(4)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	suffix := "-metrics-" + rand.String(4)
	var reader *rbacv1.ClusterRole
	for _, o := range hubRBAC(t) {
		if cr, ok := o.(*rbacv1.ClusterRole); ok && cr.Name == "anchorage-metrics-reader" {
			reader = cr
		}
	}
	g.Expect(reader).NotTo(BeNil(), "config/default ships the scraper role")
	applyRenamed(t, c, []client.Object{reader, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}},
	}}, suffix)
	token := func(sa string) string {
		g.Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})).To(Succeed())
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(600))},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "TokenRequest for %s", sa)
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")

	addr := freeAddr(t)
	replica, err := app.New(ctx, defaultReplica("metrics-test", addr, prometheus.NewRegistry()))
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- replica.Start(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("the replica did not stop")
		}
	}()

	// The certificate is self-signed: the token is what is checked here.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	scrape := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	g.Eventually(func() int { code, _ := scrape(""); return code }, 30*time.Second, 200*time.Millisecond).
		Should(Equal(http.StatusUnauthorized), "no token")
	// A malformed token makes the TokenReview itself fail, which controller-runtime's
	// filter answers with 500 rather than 401: refused either way.
	code, body := scrape("not-a-token")
	g.Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusInternalServerError), "a token the API server does not know: %s", body)
	code, _ = scrape(stranger)
	g.Expect(code).To(Equal(http.StatusForbidden), "a ServiceAccount not bound to the scraper role")
	code, body = scrape(scraper)
	g.Expect(code).To(Equal(http.StatusOK), body)
	// The replica's own series go to its test registry; the endpoint serves
	// controller-runtime's, which always holds the client's request counts.
	g.Expect(body).To(ContainSubstring("rest_client_requests_total"))

	// Plain HTTP is refused on the secure port.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err == nil {
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "plain HTTP on the HTTPS port")
	}
}

// freeAddr reserves a loopback port and releases it for the replica to bind.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func ptrTo[T any](v T) *T { return &v }
