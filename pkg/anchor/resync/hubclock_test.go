package resync

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestHubClockReadsTheDateHeader: the hub's time is the local time plus the offset the
// last response's Date header showed (never later than the hub's real time); unknown
// before any response and after responses without a usable header.
func TestHubClockReadsTheDateHeader(t *testing.T) {
	local := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(local)
	hubSkew := -61500 * time.Millisecond // the hub's clock runs 61.5 s behind the local one
	var date string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if date != "" {
			w.Header()["Date"] = []string{date}
		} else {
			w.Header()["Date"] = nil // net/http would add one
		}
	}))
	defer srv.Close()
	h := NewHubClock(clk)
	c := &http.Client{Transport: h.Wrap(http.DefaultTransport)}
	get := func() {
		t.Helper()
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}

	if _, ok := h.At(local); ok {
		t.Fatal("the hub's time is known before any response")
	}
	get()
	if _, ok := h.At(local); ok {
		t.Fatal("a response without a Date header made the hub's time known")
	}
	date = local.Add(hubSkew).Format(http.TimeFormat) // truncated to the second: 62 s behind
	get()
	got, ok := h.At(local.Add(time.Hour))
	if !ok {
		t.Fatal("the hub's time is unknown after a response with a Date header")
	}
	if want := local.Add(time.Hour).Add(-62 * time.Second); !got.Equal(want) {
		t.Errorf("hub time = %s, want %s", got, want)
	}
	if real := local.Add(time.Hour).Add(hubSkew); got.After(real) {
		t.Errorf("the estimate %s is later than the hub's real time %s", got, real)
	}
	date = "not a date"
	get()
	if again, _ := h.At(local.Add(time.Hour)); !again.Equal(got) {
		t.Errorf("an unparseable header changed the estimate to %s", again)
	}
	var none *HubClock
	if _, ok := none.At(local); ok {
		t.Error("a nil HubClock knows the hub's time")
	}
}
