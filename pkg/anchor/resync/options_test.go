package resync_test

import (
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
// these as being finalized; they must be the finalizers pkg/gateway writes.
func TestDefaultFinalizersAreTheLivePaths(t *testing.T) {
	want := map[schema.GroupKind]string{
		{Group: v1alpha.GroupVersion.Group, Kind: "HTTPProxy"}: v1alpha.HTTPProxyFinalizer,
		{Group: gatewayv1.GroupName, Kind: "Gateway"}:          gateway.GatewayFinalizer,
		{Group: gatewayv1.GroupName, Kind: "HTTPRoute"}:        gateway.HTTPRouteFinalizer,
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
	cases := []struct {
		reason string
		opts   resync.Options
		want   string
	}{
		{"the defaults are valid", resync.Options{}, ""},
		{"a cap above the ceiling could never be reached", resync.Options{MaxDeletionsPerPass: 600}, "ceiling (500) must not be below the per-pass cap (600)"},
		{"confirmation must come before the next pass", resync.Options{Period: time.Minute, ConfirmAfter: time.Minute}, "confirmation delay"},
		{"negative durations", resync.Options{MinAge: -time.Second}, "must not be negative"},
		{"negative limits", resync.Options{LiveQPS: -1}, "must not be negative"},
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
	d := resync.Options{}.WithDefaults()
	if d.MinAge != 5*time.Minute || d.Disabled || d.DryRun {
		t.Errorf("defaults: minimum age %s, disabled %t, dry-run %t; want 5m, on, deleting", d.MinAge, d.Disabled, d.DryRun)
	}
}
