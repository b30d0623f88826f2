package anchor

import (
	"testing"
)

// FuzzDecode checks that Decode never panics, and that whatever it accepts is exactly
// what Name and Owner.Labels write for the decoded owner (up to the legacy spelling of
// the cluster name), so an accepted anchor always identifies one owner.
//
// present is a bit mask of which labels exist, in the order cluster name, group, kind,
// name, namespace, so the fuzzer explores missing labels as well as bad values.
func FuzzDecode(f *testing.F) {
	f.Add(Name(testUID), "cluster-org_proj", "gateway.networking.k8s.io", "Gateway", "web", "default", uint8(0x1f))
	f.Add(Name(testUID), "cluster-_proj", "", "HTTPRoute", "r", "ns", uint8(0x1f))
	f.Add(Name(testUID), "cluster-proj", "", "Service", "svc", "ns", uint8(0x1b))
	f.Add("anchor-web", "cluster-a_b_c", "g", "k", "n", "n", uint8(0x1f))

	keys := []string{LabelClusterName, LabelGroup, LabelKind, LabelName, LabelNamespace}
	f.Fuzz(func(t *testing.T, name, cluster, group, kind, objName, namespace string, present uint8) {
		labels := map[string]string{}
		for i, v := range []string{cluster, group, kind, objName, namespace} {
			if present&(1<<i) != 0 {
				labels[keys[i]] = v
			}
		}
		owner, err := Decode(name, labels)
		if err != nil {
			return
		}
		if got := Name(owner.UID); got != name {
			t.Fatalf("Decode accepted name %q, but the owner's anchor is named %q", name, got)
		}
		again, err := Decode(Name(owner.UID), owner.Labels())
		if err != nil {
			t.Fatalf("Decode(%q, %v) = %v, but its own labels do not decode: %v", name, labels, owner, err)
		}
		if again != owner {
			t.Fatalf("round trip changed the owner: %v, then %v", owner, again)
		}
		if err := owner.Validate(); err != nil {
			t.Fatalf("decoded owner %v does not validate: %v", owner, err)
		}
		for k, v := range owner.Labels() {
			if k != LabelClusterName && labels[k] != v {
				t.Fatalf("label %s: decoded from %q but written as %q", k, labels[k], v)
			}
		}
	})
}
