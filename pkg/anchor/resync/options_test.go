package resync_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/gateway"
)

// TestDefaultFinalizersAreTheLivePaths: the resync treats an owner terminating with
// these as being finalized; they must be the finalizers pkg/gateway writes or honours
// (the previous manager's, on the kinds it anchored).
func TestDefaultFinalizersAreTheLivePaths(t *testing.T) {
	want := map[schema.GroupKind]string{
		{Group: v1alpha.GroupVersion.Group, Kind: "HTTPProxy"}: v1alpha.HTTPProxyFinalizer,
		{Group: gatewayv1.GroupName, Kind: "Gateway"}:          gateway.GatewayFinalizer,
		{Group: gatewayv1.GroupName, Kind: "HTTPRoute"}:        gateway.HTTPRouteFinalizer,
		{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:     gateway.HTTPRouteFinalizer,
	}
	for _, gk := range resync.PreviousReplicatedKinds {
		want[gk] = v1alpha.HTTPProxyReplicatorFinalizer
	}
	if len(resync.DefaultFinalizers) != len(want) {
		t.Fatalf("DefaultFinalizers has %d entries, want %d", len(resync.DefaultFinalizers), len(want))
	}
	for gk, f := range want {
		if got := resync.DefaultFinalizers[gk]; got != f {
			t.Errorf("finalizer of %s: got %q, want %q", gk, got, f)
		}
	}
}

func TestResyncOptionsValidate(t *testing.T) {
	with := func(edit func(*resync.Options)) resync.Options {
		o := resync.DefaultOptions()
		edit(&o)
		return o
	}
	cases := []struct {
		reason string
		opts   resync.Options
		want   string
	}{
		{"the defaults are valid", resync.DefaultOptions(), ""},
		{"a cap above the ceiling could never be reached", with(func(o *resync.Options) { o.MaxDeletionsPerPass = 600 }), "ceiling (500) must not be below the per-pass cap (600)"},
		{"confirmation must come before the next pass", with(func(o *resync.Options) { o.Period, o.ConfirmAfter = time.Minute, time.Minute }), "confirmation delay"},
		{"negative durations", with(func(o *resync.Options) { o.MinAge = -time.Second }), "must be positive"},
		{"negative limits", with(func(o *resync.Options) { o.DeletionQPS = -1 }), "must be positive"},
		{"a zero is refused, not defaulted", with(func(o *resync.Options) { o.Workers = 0 }), "must be positive"},
		{"no options at all", resync.Options{}, "must be positive"},
		{"Secrets are never an owner kind read live", with(func(o *resync.Options) { o.LiveOwnerKinds = []schema.GroupKind{{Kind: "Secret"}} }), "Secrets are never read"},
		{"Secrets are never listed as dependents", with(func(o *resync.Options) { o.ExtraDependentKinds = []schema.GroupKind{{Kind: "Secret"}} }), "Secrets are never read"},
		{"no wildcard kinds", with(func(o *resync.Options) { o.ExtraDependentKinds = []schema.GroupKind{{Group: "*", Kind: "*"}} }), "no wildcards"},
		{"a kind has a name", with(func(o *resync.Options) { o.LiveOwnerKinds = []schema.GroupKind{{Group: "apps"}} }), "names no kind"},
		{"an extra dependent kind", with(func(o *resync.Options) {
			o.ExtraDependentKinds = []schema.GroupKind{{Group: "apps", Kind: "Deployment"}}
		}), ""},
	}
	for _, tc := range cases {
		err := tc.opts.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.reason, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.reason, err, tc.want)
		}
	}
	d := resync.DefaultOptions()
	if d.MinAge != 5*time.Minute || d.Disabled || d.DryRun {
		t.Errorf("defaults: minimum age %s, disabled %t, dry-run %t; want 5m, on, deleting", d.MinAge, d.Disabled, d.DryRun)
	}
}

// The dependents scan lists anchors and what the live path writes on the hub, derived
// from the one table of writes, plus an operator's extra kinds: never every kind.
func TestDependentKindsOfTheLivePathsWrites(t *testing.T) {
	got := resync.DependentKindsOf(resync.DefaultHubWrites, nil)
	want := []schema.GroupKind{
		{Kind: "ConfigMap"}, {Group: "gateway.networking.k8s.io", Kind: "BackendTLSPolicy"}, {Group: "cert-manager.io", Kind: "Certificate"},
		{Group: "externaldns.k8s.io", Kind: "DNSEndpoint"}, {Group: "discovery.k8s.io", Kind: "EndpointSlice"}, {Group: "gateway.networking.k8s.io", Kind: "Gateway"},
		{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}, {Kind: "Service"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("DependentKindsOf(DefaultHubWrites) = %v, want %v", got, want)
	}
	extra := resync.DependentKindsOf(resync.DefaultHubWrites, []schema.GroupKind{{Group: "apps", Kind: "Deployment"}, {Kind: "ConfigMap"}})
	if !slices.Equal(extra, append(want, schema.GroupKind{Group: "apps", Kind: "Deployment"})) {
		t.Errorf("with extra kinds: %v", extra)
	}
}

func TestParseGroupKinds(t *testing.T) {
	got, err := resync.ParseGroupKinds(" apps/Deployment, ConfigMap ,,networking.datumapis.com/HTTPProxy")
	want := []schema.GroupKind{{Group: "apps", Kind: "Deployment"}, {Kind: "ConfigMap"}, {Group: "networking.datumapis.com", Kind: "HTTPProxy"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseGroupKinds = %v, %v; want %v", got, err, want)
	}
	if s := resync.FormatGroupKinds(want); s != "apps/Deployment,ConfigMap,networking.datumapis.com/HTTPProxy" {
		t.Errorf("FormatGroupKinds = %q", s)
	}
	for _, bad := range []string{"apps/", "a/b/c"} {
		if _, err := resync.ParseGroupKinds(bad); err == nil {
			t.Errorf("ParseGroupKinds(%q) accepted", bad)
		}
	}
}

// The owner kinds read live by default are exactly the kinds the live path anchors
// (those it finalizes): the plane's role grants get on these and nothing else.
func TestDefaultLiveOwnerKindsAreTheAnchoredKinds(t *testing.T) {
	for gk := range resync.DefaultFinalizers {
		if !slices.Contains(resync.DefaultLiveOwnerKinds, gk) {
			t.Errorf("%s is anchored but not read live by default", gk)
		}
	}
	if len(resync.DefaultLiveOwnerKinds) != len(resync.DefaultFinalizers) {
		t.Errorf("DefaultLiveOwnerKinds %v: want the kinds of DefaultFinalizers", resync.DefaultLiveOwnerKinds)
	}
}
