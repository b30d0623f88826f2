package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"anchorage/internal/testenv"
)

// EdgeControllerName is the controller name of the oracle's GatewayClass: Envoy
// Gateway's own, so its translator takes the hub's Gateways as its to program.
const EdgeControllerName = "gateway.envoyproxy.io/gatewayclass-controller"

// Edge stands in for an edge cluster that reads the hub: its gateway controller is
// Envoy Gateway's translator (bin/edge-translate, hack/edge-translate), its Envoy runs
// at Address, and cert-manager (run against the hub by the caller) writes the TLS
// Secrets of the hub's Certificates. It reads
// one hub namespace as the edge's Karmada propagation would hand it over, and can write
// the verdict back onto the hub's Gateways and HTTPRoutes as the edge's controller does
// (Publish), so a manager that mirrors that status is judged by a controller nobody
// here wrote.
type Edge struct {
	// Hub is read for the objects and written for their status.
	Hub client.Client
	// GatewayClass is the class the hub's Gateways name (the manager's downstream class).
	GatewayClass string
	// Address is the edge Envoy's address; Envoy Gateway reports a Gateway Programmed
	// only once its Envoy has one. Default 192.0.2.10.
	Address string
	// Merged translates the class's Gateways as one Envoy serving them all (an EnvoyProxy
	// with mergeGateways on the GatewayClass, as the previous manager's edges run):
	// listeners of different Gateways on one port then conflict unless their hostnames
	// differ. Default true.
	Merged bool

	binary  string
	mu      sync.Mutex
	lastErr error
}

// NewEdge returns an edge reading hub, for Gateways of class. It fails when the oracle
// binary has not been built.
func NewEdge(hub client.Client, class string) (*Edge, error) {
	bin, err := testenv.EdgeTranslateBinary()
	if err != nil {
		return nil, err
	}
	return &Edge{Hub: hub, GatewayClass: class, Address: "192.0.2.10", Merged: true, binary: bin}, nil
}

// EdgeVerdict is what Envoy Gateway's translator makes of one hub namespace: each
// object's status as it computes it, and the xDS resources an Envoy would run, by IR key
// and type URL.
type EdgeVerdict struct {
	Gateways           []gatewayv1.Gateway                     `json:"gateways"`
	HTTPRoutes         []gatewayv1.HTTPRoute                   `json:"httpRoutes"`
	BackendTLSPolicies []gatewayv1.BackendTLSPolicy            `json:"backendTLSPolicies"`
	Xds                map[string]map[string][]json.RawMessage `json:"xds"`
	// Input is the YAML the translator was given, for a failing test to print.
	Input string `json:"-"`
}

// Translate runs the translator over everything the hub holds in namespaces that an
// edge's gateway controller reads.
func (e *Edge) Translate(ctx context.Context, namespaces ...string) (*EdgeVerdict, error) {
	input, err := e.input(ctx, namespaces)
	if err != nil {
		return nil, err
	}
	return e.translate(ctx, input)
}

func (e *Edge) translate(ctx context.Context, input string) (*EdgeVerdict, error) {
	cmd := exec.CommandContext(ctx, e.binary, "-f", "-", "-envoy-address", e.Address)
	cmd.Stdin = strings.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("running %s: %w: %s", e.binary, err, stderr.String())
	}
	v := &EdgeVerdict{Input: input}
	if err := json.Unmarshal(stdout.Bytes(), v); err != nil {
		return nil, fmt.Errorf("reading the translator's verdict: %w", err)
	}
	return v, nil
}

// input is the namespaces' objects as YAML documents, behind a GatewayClass of the
// edge's controller, with the TLS Secrets cert-manager wrote.
func (e *Edge) input(ctx context.Context, namespaces []string) (string, error) {
	class := &gatewayv1.GatewayClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "GatewayClass"},
		ObjectMeta: metav1.ObjectMeta{Name: e.GatewayClass},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: EdgeControllerName},
	}
	docs := []any{class}
	if e.Merged {
		const ns, name = "envoy-gateway-system", "merged"
		class.Spec.ParametersRef = &gatewayv1.ParametersReference{Group: "gateway.envoyproxy.io", Kind: "EnvoyProxy", Name: name, Namespace: ptr.To(gatewayv1.Namespace(ns))}
		docs = append(docs, map[string]any{
			"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "EnvoyProxy",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"mergeGateways": true},
		})
	}
	for _, ns := range namespaces {
		more, err := e.namespaceDocs(ctx, ns)
		if err != nil {
			return "", err
		}
		docs = append(docs, more...)
	}
	var b strings.Builder
	for _, d := range docs {
		out, err := manifest(d)
		if err != nil {
			return "", err
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return b.String(), nil
}

// namespaceDocs returns what the hub holds in namespace that an edge reads.
func (e *Edge) namespaceDocs(ctx context.Context, namespace string) ([]any, error) {
	docs := []any{&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: namespace}}}
	in := client.InNamespace(namespace)
	gws, routes := &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}
	svcs, slices_, policies := &corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &gatewayv1.BackendTLSPolicyList{}
	for _, l := range []client.ObjectList{gws, routes, svcs, slices_, policies} {
		if err := e.Hub.List(ctx, l, in); err != nil {
			return nil, fmt.Errorf("listing hub objects in %s: %w", namespace, err)
		}
	}
	for i := range gws.Items {
		docs = append(docs, typed(&gws.Items[i], "gateway.networking.k8s.io/v1", "Gateway"))
	}
	for i := range routes.Items {
		docs = append(docs, typed(&routes.Items[i], "gateway.networking.k8s.io/v1", "HTTPRoute"))
	}
	for i := range svcs.Items {
		docs = append(docs, typed(&svcs.Items[i], "v1", "Service"))
	}
	for i := range slices_.Items {
		docs = append(docs, typed(&slices_.Items[i], "discovery.k8s.io/v1", "EndpointSlice"))
	}
	for i := range policies.Items {
		docs = append(docs, typed(&policies.Items[i], "gateway.networking.k8s.io/v1", "BackendTLSPolicy"))
	}
	issued, err := e.tlsSecrets(ctx, namespace)
	if err != nil {
		return nil, err
	}
	for _, s := range issued {
		docs = append(docs, s)
	}
	return docs, nil
}

// typed sets obj's type, which a list's items lack, so it reads as a manifest.
func typed[T client.Object](obj T, apiVersion, kind string) T {
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	return obj
}

// manifest is obj as YAML without its status, which is the edge's to write and which
// the translator's loader would validate as input.
func manifest(obj any) ([]byte, error) {
	raw, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	// What the hub changes on every write (status writes included) is no input: an
	// unchanged input needs no new translation (Serve).
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"resourceVersion", "managedFields", "creationTimestamp"} {
			delete(md, k)
		}
	}
	return yaml.Marshal(m)
}

// tlsSecrets returns the TLS Secrets the hub holds in namespace: those cert-manager
// wrote for the Certificates there (the tests and the demo run cert-manager's own
// controller against the hub), and a platform's shared one. A listener whose Secret is
// not written yet is judged by the translator as Envoy Gateway would judge it.
func (e *Edge) tlsSecrets(ctx context.Context, namespace string) ([]*corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := e.Hub.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Secrets in %s: %w", namespace, err)
	}
	var out []*corev1.Secret
	for i := range list.Items {
		if list.Items[i].Type == corev1.SecretTypeTLS {
			out = append(out, typed(&list.Items[i], "v1", "Secret"))
		}
	}
	return out, nil
}

// Publish writes the verdict's status onto the hub's Gateways and HTTPRoutes, as the
// edge's gateway controller does: the Gateway's conditions, addresses and listeners, and
// the route's status.parents entries of the edge's controller (others' are kept). An
// object whose status already reads so is not written. Each object is written on its
// own: one that is gone is skipped, and one the hub refuses (Envoy Gateway joins several
// reasons into one that the HTTPRoute schema rejects) holds up no other; the refusals are
// returned together once every object was tried.
func (e *Edge) Publish(ctx context.Context, v *EdgeVerdict) error {
	var errs []error
	for i := range v.Gateways {
		want := &v.Gateways[i]
		gw := &gatewayv1.Gateway{}
		if err := e.Hub.Get(ctx, client.ObjectKeyFromObject(want), gw); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		status := *want.Status.DeepCopy()
		stampTransitions(status.Conditions, gw.Status.Conditions)
		for j := range status.Listeners {
			var old []metav1.Condition
			for _, l := range gw.Status.Listeners {
				if l.Name == status.Listeners[j].Name {
					old = l.Conditions
				}
			}
			stampTransitions(status.Listeners[j].Conditions, old)
		}
		if equality.Semantic.DeepEqual(gw.Status, status) {
			continue
		}
		gw.Status = status
		errs = append(errs, client.IgnoreNotFound(e.Hub.Status().Update(ctx, gw)))
	}
	for i := range v.HTTPRoutes {
		want := &v.HTTPRoutes[i]
		route := &gatewayv1.HTTPRoute{}
		if err := e.Hub.Get(ctx, client.ObjectKeyFromObject(want), route); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		var parents []gatewayv1.RouteParentStatus
		for _, p := range route.Status.Parents {
			if p.ControllerName != EdgeControllerName {
				parents = append(parents, p)
			}
		}
		for _, p := range want.Status.Parents {
			p := *p.DeepCopy()
			var old []metav1.Condition
			for _, o := range route.Status.Parents {
				if o.ControllerName == EdgeControllerName && o.ParentRef.Name == p.ParentRef.Name {
					old = o.Conditions
				}
			}
			stampTransitions(p.Conditions, old)
			parents = append(parents, p)
		}
		if equality.Semantic.DeepEqual(route.Status.Parents, parents) {
			continue
		}
		route.Status.Parents = parents
		errs = append(errs, client.IgnoreNotFound(e.Hub.Status().Update(ctx, route)))
	}
	return errors.Join(errs...)
}

// stampTransitions gives conds the transition times the API server requires: old's
// where the status did not change, now otherwise.
func stampTransitions(conds, old []metav1.Condition) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for i := range conds {
		conds[i].LastTransitionTime = now
		for _, o := range old {
			if o.Type == conds[i].Type && o.Status == conds[i].Status {
				conds[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
}

// Serve translates the namespaces namespaces returns, and publishes the verdict, every
// interval until ctx ends, as a running edge controller keeps the hub's status current.
// A round whose input is what the last published round translated runs no translator.
// Errors are retried at the next tick; the last one is kept for LastError.
func (e *Edge) Serve(ctx context.Context, namespaces func(context.Context) ([]string, error), interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var published string
	for {
		err := func() error {
			nss, err := namespaces(ctx)
			if err != nil {
				return err
			}
			input, err := e.input(ctx, nss)
			if err != nil || input == published {
				return err
			}
			v, err := e.translate(ctx, input)
			if err != nil {
				return err
			}
			if err := e.Publish(ctx, v); err != nil {
				return err
			}
			published = input
			return nil
		}()
		e.mu.Lock()
		if ctx.Err() == nil {
			e.lastErr = err
		}
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Namespaces is a Serve source of a fixed list.
func Namespaces(names ...string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) { return names, nil }
}

// MappedNamespacesWithGateways is a Serve source: every ns-<uid> namespace of hub that
// holds a Gateway.
func MappedNamespacesWithGateways(hub client.Reader) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		gws := &gatewayv1.GatewayList{}
		if err := hub.List(ctx, gws); err != nil {
			return nil, err
		}
		var out []string
		for _, g := range gws.Items {
			if strings.HasPrefix(g.Namespace, "ns-") && !slices.Contains(out, g.Namespace) {
				out = append(out, g.Namespace)
			}
		}
		slices.Sort(out)
		return out, nil
	}
}

// LastError is the error of Serve's last round, nil when it succeeded.
func (e *Edge) LastError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastErr
}

// Resources returns the xDS resources of typeURL across every IR key, decoded into T.
func Resources[T any](v *EdgeVerdict, typeURL string) ([]T, error) {
	var out []T
	keys := make([]string, 0, len(v.Xds))
	for k := range v.Xds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, raw := range v.Xds[k][typeURL] {
			var r T
			if err := json.Unmarshal(raw, &r); err != nil {
				return nil, fmt.Errorf("decoding a %s: %w", typeURL, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}
