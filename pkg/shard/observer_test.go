package shard

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// TestStoreDecision: which Lease version the observer keeps.
func TestStoreDecision(t *testing.T) {
	cases := []struct {
		name          string
		prev, version string
		own, lagging  bool
		want          storeVerdict
	}{
		{"first sight", "", "5", false, false, storeNewer},
		{"same version", "5", "5", false, false, storeKeep},
		{"newer from the watch", "5", "9", false, false, storeNewer},
		{"newer from an own write", "5", "9", true, false, storeNewer},
		{"late answer to an own write", "9", "5", true, false, storeKeep},
		{"the watch trailing an own write", "9", "5", false, true, storeKeep},
		{"the watch goes back (etcd restore)", "9", "5", false, false, storeRegressed},
		{"versions that are not numbers are news", "x", "y", false, false, storeNewer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := storeDecision(tc.prev, tc.version, tc.own, tc.lagging); got != tc.want {
				t.Errorf("storeDecision(%q, %q, own=%v, lagging=%v) = %v, want %v", tc.prev, tc.version, tc.own, tc.lagging, got, tc.want)
			}
		})
	}
}

// TestObserverFollowsAnEtcdRestore: once resourceVersions go back, the observer takes the
// restored Leases from the watch instead of ignoring them for good; the watch trailing
// this process's own write is still ignored, for a Lease duration.
func TestObserverFollowsAnEtcdRestore(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	o := newLeaseObserver(clk, 15*time.Second, 400*time.Millisecond)
	lease := func(rv, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "anchorage-project-p", ResourceVersion: rv, Labels: map[string]string{LabelRole: roleProject}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
		}
	}
	holder := func() string {
		_, projects, _ := o.snapshot()
		return projects["anchorage-project-p"].Holder()
	}

	o.observe(lease("900", "a/1"), false)
	o.observe(lease("120", "b/1"), false) // restored: older than anything seen
	if got := holder(); got != "b/1" {
		t.Fatalf("after the restore the observer holds %q, want the restored b/1", got)
	}
	o.observe(lease("130", "c/1"), true) // this process writes
	o.observe(lease("125", "b/1"), false)
	if got := holder(); got != "c/1" {
		t.Fatalf("the watch trailing an own write replaced it: %q", got)
	}
	clk.Step(16 * time.Second)
	o.observe(lease("126", "d/1"), false)
	if got := holder(); got != "d/1" {
		t.Fatalf("a Lease duration after the own write, an older watch version is still ignored: %q", got)
	}
	if o.regressions != 2 {
		t.Errorf("regressions = %d, want 2", o.regressions)
	}
}
