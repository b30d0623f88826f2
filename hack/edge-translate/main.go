// Command edge-translate reads Gateway API objects as an edge cluster would read them
// from the hub (YAML documents on stdin or in -f) and prints what Envoy Gateway makes of
// them: the status its translator gives every Gateway, HTTPRoute and BackendTLSPolicy,
// and the xDS (listeners, routes, clusters, secrets) an Envoy would run.
//
// It is the test oracle of anchorage's data path, so none of its judgement is written
// here: this file only feeds Envoy Gateway's own translator and prints its verdict.
// Why not `egctl x translate`: egctl's loader skips EndpointSlices, so every headless
// Service, the shape a hostname backend takes on the hub, reads as "no ready endpoints"
// to it. This program loads the documents with the same loader, then adds the
// EndpointSlices the way Envoy Gateway's Kubernetes provider hands them to the
// translator, and translates with endpoint routing on (that provider's default).
//
// The module path sits under github.com/envoyproxy/gateway because the translator
// lives in that module's internal packages.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"github.com/envoyproxy/gateway/internal/gatewayapi"
	"github.com/envoyproxy/gateway/internal/gatewayapi/resource"
	"github.com/envoyproxy/gateway/internal/gatewayapi/status"
	"github.com/envoyproxy/gateway/internal/logging"
	"github.com/envoyproxy/gateway/internal/xds/translator"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// verdict is what this program prints, as JSON.
type verdict struct {
	Gateways           []any                     `json:"gateways"`
	HTTPRoutes         []any                     `json:"httpRoutes"`
	BackendTLSPolicies []any                     `json:"backendTLSPolicies"`
	Xds                map[string]map[string]any `json:"xds"`
}

func main() {
	file := flag.String("f", "-", "the YAML documents to translate; - for stdin")
	address := flag.String("envoy-address", "", "the address of the edge's running Envoy: Gateways then get the Accepted and Programmed conditions Envoy Gateway's Kubernetes provider gives them for a ready Envoy Deployment behind a LoadBalancer Service with this address; empty leaves them as the translator does (no Gateway-level conditions)")
	flag.Parse()
	if err := run(*file, *address, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "edge-translate:", err)
		os.Exit(1)
	}
}

func run(file, envoyAddress string, w io.Writer) error {
	in, err := readInput(file)
	if err != nil {
		return err
	}
	res, err := resource.LoadResourcesFromYAMLBytes(in, false, nil)
	if err != nil {
		return fmt.Errorf("loading the documents: %w", err)
	}
	if res.GatewayClass == nil {
		return fmt.Errorf("the input holds no GatewayClass")
	}
	slices, metas, err := readDocuments(in)
	if err != nil {
		return err
	}
	res.EndpointSlices = append(res.EndpointSlices, slices...)
	restoreMetadata(res, metas)

	t := &gatewayapi.Translator{
		GatewayControllerName: string(res.GatewayClass.Spec.ControllerName),
		GatewayClassName:      gwapiv1.ObjectName(res.GatewayClass.Name),
		BackendEnabled:        true,
		// An EnvoyProxy on the class with mergeGateways: one Envoy serves every Gateway
		// of the class, so their listeners may conflict (Envoy Gateway's runner decides
		// it the same way).
		MergeGateways: gatewayapi.IsMergeGatewaysEnabled(res),
		Logger:        logging.DefaultLogger(io.Discard, egv1a1.LogLevelInfo),
	}
	result, _ := t.Translate(res) // statuses carry every refusal; the error only sums them up

	out := verdict{Xds: map[string]map[string]any{}}
	for _, g := range result.Gateways {
		if envoyAddress != "" {
			finishGatewayStatus(g, envoyAddress)
		}
		out.Gateways = append(out.Gateways, g)
	}
	for _, r := range result.HTTPRoutes {
		out.HTTPRoutes = append(out.HTTPRoutes, r)
	}
	for _, p := range result.BackendTLSPolicies {
		out.BackendTLSPolicies = append(out.BackendTLSPolicies, p)
	}
	keys := make([]string, 0, len(result.XdsIR))
	for k := range result.XdsIR {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		xt := &translator.Translator{Logger: logging.DefaultLogger(io.Discard, egv1a1.LogLevelInfo)}
		table, err := xt.Translate(result.XdsIR[k])
		if err != nil {
			return fmt.Errorf("translating the IR of %s to xDS: %w", k, err)
		}
		byType := map[string]any{}
		for typeURL, resources := range table.XdsResources {
			var list []any
			for _, r := range resources {
				msg, ok := r.(proto.Message)
				if !ok {
					continue
				}
				raw, err := protojson.Marshal(msg)
				if err != nil {
					return fmt.Errorf("printing a %s: %w", typeURL, err)
				}
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					return err
				}
				list = append(list, v)
			}
			byType[typeURL] = list
		}
		out.Xds[k] = byType
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// finishGatewayStatus does what Envoy Gateway's Kubernetes provider does after the
// translator (internal/provider/kubernetes/status.go): a Gateway the translator did not
// refuse is Accepted, and its Programmed condition and addresses come from the Envoy
// Service and Deployment, here a LoadBalancer Service at address and one ready replica.
func finishGatewayStatus(gw *gwapiv1.Gateway, address string) {
	if !status.GatewayAccepted(gw) {
		return
	}
	status.UpdateGatewayStatusAccepted(gw)
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: address}}
	envoy := &appsv1.Deployment{Status: appsv1.DeploymentStatus{Replicas: 1, AvailableReplicas: 1}}
	status.UpdateGatewayStatusProgrammedCondition(gw, svc, envoy, status.NodeAddresses{})
}

func readInput(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(file)
}

// readDocuments decodes the EndpointSlice documents of in, and the metadata of every
// document by kind, namespace and name.
func readDocuments(in []byte) ([]*discoveryv1.EndpointSlice, map[string]metav1.ObjectMeta, error) {
	var out []*discoveryv1.EndpointSlice
	metas := map[string]metav1.ObjectMeta{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(in)))
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			return out, metas, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("splitting the documents: %w", err)
		}
		var head struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil || head.Kind == "" {
			continue
		}
		metas[metaKey(head.Kind, head.Metadata.Namespace, head.Metadata.Name)] = head.Metadata
		if head.Kind != "EndpointSlice" {
			continue
		}
		s := &discoveryv1.EndpointSlice{}
		if err := yaml.UnmarshalStrict(doc, s); err != nil {
			return nil, nil, fmt.Errorf("reading an EndpointSlice: %w", err)
		}
		out = append(out, s)
	}
}

func metaKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// restoreMetadata gives the loaded objects the metadata their documents carry (the
// loader keeps only names): a status then names the generation it was computed for,
// as Envoy Gateway's Kubernetes provider, which hands over whole objects, reports it.
func restoreMetadata(res *resource.Resources, metas map[string]metav1.ObjectMeta) {
	restore := func(kind string, m *metav1.ObjectMeta) {
		if full, ok := metas[metaKey(kind, m.Namespace, m.Name)]; ok {
			*m = full
		}
	}
	for _, g := range res.Gateways {
		restore("Gateway", &g.ObjectMeta)
	}
	for _, r := range res.HTTPRoutes {
		restore("HTTPRoute", &r.ObjectMeta)
	}
	for _, s := range res.Services {
		restore("Service", &s.ObjectMeta)
	}
	for _, p := range res.BackendTLSPolicies {
		restore("BackendTLSPolicy", &p.ObjectMeta)
	}
}
