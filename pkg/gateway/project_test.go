package gateway

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestIsNotFoundOf(t *testing.T) {
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "team"}}
	gateways := schema.GroupResource{Group: gatewayv1.GroupName, Resource: "gateways"}
	cases := []struct {
		reason string
		err    error
		want   bool
	}{
		{"NotFound naming the object", apierrors.NewNotFound(gateways, "team"), true},
		{"NotFound naming its namespace (a write into a purged namespace)", apierrors.NewNotFound(corev1.Resource("namespaces"), "team"), false},
		{"NotFound naming another object", apierrors.NewNotFound(gateways, "other"), false},
		{"NotFound without details", &apierrors.StatusError{ErrStatus: metav1.Status{Reason: metav1.StatusReasonNotFound, Code: 404}}, false},
		{"another error", errors.New("boom"), false},
		{"404 of a kind not served (no name, not a status)", &apierrors.StatusError{ErrStatus: metav1.Status{Reason: metav1.StatusReasonNotFound, Code: 404, Details: &metav1.StatusDetails{
			Name: "team", Group: gatewayv1.GroupName, Kind: "gateways",
			Causes: []metav1.StatusCause{{Type: metav1.CauseTypeUnexpectedServerResponse, Message: "404 page not found"}}}}}, false},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := gatewayv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	// The fake client's own RESTMapper knows no kinds (the project's client maps them
	// from discovery), and guessing "Gateway"'s plural gives "gatewaies": spell both out.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(gatewayv1.SchemeGroupVersion.WithKind("Gateway"), gatewayv1.SchemeGroupVersion.WithResource("gateways"), gatewayv1.SchemeGroupVersion.WithResource("gateway"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).Build()
	for _, tc := range cases {
		if got := isNotFoundOf(c, tc.err, gw); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.reason, got, tc.want)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	if !isNotFoundOf(c, apierrors.NewNotFound(corev1.Resource("namespaces"), "team"), ns) {
		t.Error("a NotFound naming a Namespace is about that Namespace")
	}
}
