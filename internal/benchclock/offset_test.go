package benchclock

import (
	"testing"
	"time"
)

func TestOffsetNowAndSince(t *testing.T) {
	for _, by := range []time.Duration{0, 60 * time.Second, -60 * time.Second} {
		c := Offset{By: by}
		before := time.Now()
		now := c.Now()
		after := time.Now()
		// On the wall clock (Round(0) drops the monotonic reading) now is the local
		// time moved by by.
		if w := now.Round(0); w.Before(before.Add(by).Round(0)) || w.After(after.Add(by).Round(0)) {
			t.Errorf("offset %s: Now %s not within [%s, %s] + offset", by, w, before, after)
		}
		// A time of this clock: the real elapsed time.
		if d := c.Since(now); d < 0 || d > time.Second {
			t.Errorf("offset %s: Since(own Now) = %s, want the short real elapsed time", by, d)
		}
		// A time from elsewhere (a renew time read from a Lease, no monotonic
		// reading): off by the offset.
		remote := time.Now().Round(0)
		if d := c.Since(remote); d < by-time.Second || d > by+time.Second {
			t.Errorf("offset %s: Since(remote now) = %s, want about %s", by, d, by)
		}
	}
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    time.Duration
		real    bool
		wantErr bool
	}{
		{value: "", real: true},
		{value: "60s", want: 60 * time.Second},
		{value: "-60s", want: -60 * time.Second},
		{value: "0s", want: 0},
		{value: "sixty", wantErr: true},
	} {
		c, err := FromEnv(func(k string) string {
			if k != EnvOffset {
				t.Fatalf("read %s, want %s", k, EnvOffset)
			}
			return tc.value
		})
		switch {
		case tc.wantErr:
			if err == nil {
				t.Errorf("%q: no error", tc.value)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.value, err)
		case tc.real:
			if c != nil {
				t.Errorf("%q: got %v, want nil (the real clock)", tc.value, c)
			}
		default:
			if o, ok := c.(Offset); !ok || o.By != tc.want {
				t.Errorf("%q: got %#v, want Offset{By: %s}", tc.value, c, tc.want)
			}
		}
	}
}
