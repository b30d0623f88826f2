package app

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestResyncRunsOnTheReplicaClock: the resync and the hub clock estimate it reads run
// on one clock, the replica's unless the resync is given its own. Before, a replica
// whose Options.Clock was set (the bench's skew build) estimated the hub's clock on it
// while the resync read its own default real clock, so HubClock.At put the hub's time
// off by the replica's offset.
func TestResyncRunsOnTheReplicaClock(t *testing.T) {
	replica := clocktesting.NewFakeClock(time.Unix(1000, 0))
	own := clocktesting.NewFakeClock(time.Unix(2000, 0))
	for _, tc := range []struct {
		name         string
		clock, given *clocktesting.FakeClock
		want         *clocktesting.FakeClock
	}{
		{name: "replica clock only", clock: replica, want: replica},
		{name: "resync clock given", clock: replica, given: own, want: own},
		{name: "resync clock only", given: own, want: own},
		{name: "neither"},
	} {
		o := Options{Hub: &rest.Config{}, Identity: "r"}
		if tc.clock != nil {
			o.Clock = tc.clock
		}
		if tc.given != nil {
			o.Resync.Clock = tc.given
		}
		if err := o.defaults(); err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.want == nil && o.Resync.Clock != nil:
			t.Errorf("%s: resync clock %v, want unset (the real clock)", tc.name, o.Resync.Clock)
		case tc.want != nil && o.Resync.Clock != tc.want:
			t.Errorf("%s: resync clock %v, want %v", tc.name, o.Resync.Clock, tc.want)
		}
	}
}
