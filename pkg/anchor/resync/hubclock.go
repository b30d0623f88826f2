package resync

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// HubClock estimates the hub's clock from the Date header of its responses, so anchor
// ages are judged on the hub's clock (docs/design.md, Delete). The estimate errs young:
// the header is truncated and sent before the response travels. Install it with Wrap;
// a nil *HubClock knows nothing.
type HubClock struct {
	clock clock.PassiveClock

	mu     sync.Mutex
	offset time.Duration
	known  bool
}

// NewHubClock estimates the hub's clock against clk (the real clock when nil).
func NewHubClock(clk clock.PassiveClock) *HubClock {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &HubClock{clock: clk}
}

// Wrap returns rt reporting every response's Date header to h, for rest.Config.Wrap.
func (h *HubClock) Wrap(rt http.RoundTripper) http.RoundTripper {
	return hubClockTransport{h: h, next: rt}
}

type hubClockTransport struct {
	h    *HubClock
	next http.RoundTripper
}

func (t hubClockTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		t.h.observe(resp.Header.Get("Date"), t.h.clock.Now())
	}
	return resp, err
}

// WrappedRoundTripper lets client-go reach the real transport to cancel requests.
func (t hubClockTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// observe records the offset a Date header received at local time at shows.
func (h *HubClock) observe(date string, at time.Time) {
	served, err := http.ParseTime(date)
	if err != nil {
		return
	}
	h.mu.Lock()
	h.offset, h.known = served.Sub(at), true
	h.mu.Unlock()
}

// At returns the hub's time at local time now, and false before any response was seen.
func (h *HubClock) At(now time.Time) (time.Time, bool) {
	if h == nil {
		return time.Time{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.known {
		return time.Time{}, false
	}
	return now.Add(h.offset), true
}
