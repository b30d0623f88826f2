package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// CertManagerVersion is the cert-manager release whose CRDs the hub serves and whose
// controller hack/build-cert-manager.sh builds (hack/cert-manager/go.mod requires the
// same version). The module is only downloaded for its CRD files; go.mod does not
// require it.
const CertManagerVersion = "v1.17.2"

// ExternalDNSVersion is the external-dns release whose DNSEndpoint CRD the hub serves
// and which hack/build-external-dns.sh builds (hack/external-dns/go.mod requires the
// same version). Like cert-manager, it is only downloaded for its CRD file.
const ExternalDNSVersion = "v0.21.0"

// certManagerCRDFiles are the CRDs cert-manager's controller watches, as its module ships
// them: Certificates with the CertificateRequests they issue through, the issuers, and
// the ACME Orders and Challenges.
var certManagerCRDFiles = []string{
	"crd-certificates.yaml", "crd-certificaterequests.yaml", "crd-issuers.yaml",
	"crd-clusterissuers.yaml", "crd-orders.yaml", "crd-challenges.yaml",
}

// PreviousConnectorCRD is the previous manager's Connector CRD, served in v1alpha1 of the
// proxies' group, networking.datumapis.com, which the API server then prefers over
// v1alpha (kube-like versions sort first). Its schema is left open: the version is what
// matters to a test.
func PreviousConnectorCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "connectors.networking.datumapis.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "networking.datumapis.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "connectors", Singular: "connector", Kind: "Connector", ListKind: "ConnectorList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
}

// ProjectCRDs are the CRDs a project control plane serves: HTTPProxy and the Gateway API
// standard channel, read from the gateway-api module in the module cache.
func ProjectCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	own, err := ownCRDs()
	if err != nil {
		return nil, err
	}
	gw, err := GatewayCRDs()
	if err != nil {
		return nil, err
	}
	return append(own, gw...), nil
}

// PreviousProjectCRDs are the CRDs a project plane served under the previous manager, as
// far as the cut-over tests need them: its HTTPProxy CRD (this repository's schema, a
// superset of its, under its names: no short name, no category), its Connector CRD in
// v1alpha1 of the same group (PreviousConnectorCRD), and the Gateway API.
func PreviousProjectCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := ProjectCRDs()
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if crd.Spec.Group == "networking.datumapis.com" {
			crd.Spec.Names.ShortNames, crd.Spec.Names.Categories = nil, nil
		}
	}
	return append(crds, PreviousConnectorCRD()), nil
}

// HubCRDs are the CRDs the hub serves: the Gateway API standard channel, cert-manager's
// (the edge's cert-manager issues the hub's Certificates, and tests run the real
// controller against the hub), external-dns's DNSEndpoint, and this repository's
// HTTPProxy, because the previous manager replicated every HTTPProxy to the hub and a
// takeover finds those copies.
func HubCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, read := range []func() ([]*apiextensionsv1.CustomResourceDefinition, error){
		ownCRDs, GatewayCRDs, CertManagerCRDs, ExternalDNSCRDs,
	} {
		crds, err := read()
		if err != nil {
			return nil, err
		}
		out = append(out, crds...)
	}
	return out, nil
}

// ownCRDs are this repository's CRDs (HTTPProxy).
func ownCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return readCRDDir(filepath.Join(RepoRoot(), "config", "crd", "bases"))
}

// GatewayCRDs reads the standard-channel CRDs shipped in the gateway-api module.
func GatewayCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return GatewayChannelCRDs("standard")
}

// GatewayChannelCRDs reads the CRDs of channel (standard or experimental, the one the
// previous manager's hubs run) shipped in the gateway-api module.
func GatewayChannelCRDs(channel string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := ModuleDir("sigs.k8s.io/gateway-api")
	if err != nil {
		return nil, err
	}
	return readCRDDir(filepath.Join(dir, "config", "crd", channel))
}

// CertManagerCRDs reads cert-manager's CRDs (certManagerCRDFiles) from its module. The
// files are Helm templates: their labels and annotations hold "{{ ... }}" that an API
// server refuses, so they are dropped; the schemas are untouched. Any conversion
// webhook is dropped too: each CRD serves one version, and no webhook runs here.
func CertManagerCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := DownloadedModuleDir("github.com/cert-manager/cert-manager", CertManagerVersion)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, name := range certManagerCRDFiles {
		crd, err := readOneCRD(filepath.Join(dir, "deploy", "crds", name))
		if err != nil {
			return nil, err
		}
		crd.Labels, crd.Annotations = nil, nil
		out = append(out, crd)
	}
	return out, nil
}

// ExternalDNSCRDs reads external-dns's DNSEndpoint CRD from its module.
func ExternalDNSCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := DownloadedModuleDir("sigs.k8s.io/external-dns", ExternalDNSVersion)
	if err != nil {
		return nil, err
	}
	crd, err := readOneCRD(filepath.Join(dir, "config", "crd", "standard", "dnsendpoints.externaldns.k8s.io.yaml"))
	if err != nil {
		return nil, err
	}
	return []*apiextensionsv1.CustomResourceDefinition{crd}, nil
}

// readOneCRD reads a file that holds exactly one CRD, served without a conversion
// webhook (a webhook an API server here could never reach).
func readOneCRD(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := readCRDFile(path)
	if err != nil {
		return nil, err
	}
	if len(crds) != 1 {
		return nil, fmt.Errorf("want one CRD in %s, found %d", path, len(crds))
	}
	crds[0].Spec.Conversion = nil
	return crds[0], nil
}

func readCRDDir(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading CRD directory: %w", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		crds, err := readCRDFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, crds...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	return out, nil
}

// readCRDFile returns the CustomResourceDefinitions in a multi-document YAML file,
// skipping other kinds (gateway-api ships a ValidatingAdmissionPolicy beside its CRDs).
func readCRDFile(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading CRD file: %w", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", path, err)
		}
		if meta.Kind != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			return nil, fmt.Errorf("parsing CRD in %s: %w", path, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
