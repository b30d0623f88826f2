package shard

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestBoundPlaneCalls: a plane that hangs (before its headers, or in the middle of its
// body), or answers more than the ceiling (with or without saying so up front, or
// compressed to fewer bytes than it inflates to), fails the call; a watch is left long; a plane within the
// bounds is read whole.
func TestBoundPlaneCalls(t *testing.T) {
	release := make(chan struct{})
	plane := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hang":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/huge":
			w.Header().Set("Content-Length", "4096")
			_, _ = w.Write(make([]byte, 4096))
		case "/trickle": // the headers at once, then a body that never ends
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{"))
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/gzip-bomb": // a few compressed bytes that inflate past the ceiling
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = zw.Write(make([]byte, 64<<10))
			_ = zw.Close()
		case "/huge-chunked":
			for range 8 {
				_, _ = w.Write(make([]byte, 512))
				w.(http.Flusher).Flush()
			}
		case "/watch":
			time.Sleep(150 * time.Millisecond) // past the deadline: a watch is not bounded
			_, _ = w.Write([]byte("event"))
		default:
			_, _ = w.Write([]byte("small"))
		}
	}))
	defer func() { close(release); plane.Close() }() // the hanging handlers first
	cfg := &rest.Config{Host: plane.URL}
	if err := BoundPlaneCalls(100*time.Millisecond, 1024)(cfg); err != nil {
		t.Fatal(err)
	}
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) (string, error) {
		resp, err := c.Get(plane.URL + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for path, want := range map[string]string{
		"/hang":         "did not answer within 100ms",
		"/trickle":      "context deadline exceeded",
		"/huge":         "4096 bytes, over the ceiling of 1024",
		"/huge-chunked": "over the ceiling",
		"/gzip-bomb":    "over the ceiling",
	} {
		// A call left unbounded would hang the test: it gets ten seconds to fail.
		done := make(chan error, 1)
		go func() { _, err := read(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want an error with %q", path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: the call is still running after 10s: it is not bounded", path)
		}
	}
	if got, err := read("/small"); err != nil || got != "small" {
		t.Errorf("a small answer: %q, %v", got, err)
	}
	if got, err := read("/watch?watch=true"); err != nil || got != "event" {
		t.Errorf("a watch answering after the deadline: %q, %v", got, err)
	}
}
