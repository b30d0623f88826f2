package shard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// Bounds of plane calls other than watches (docs/design.md, Threat model).
const (
	DefaultPlaneCallTimeout = 30 * time.Second // each plane request's deadline
	PlaneAnswerCeiling      = 64 << 20         // the most bytes one plane answer may hold
)

// BoundPlaneCalls is a REST option bounding non-watch requests by timeout and ceiling bytes.
func BoundPlaneCalls(timeout time.Duration, ceiling int64) func(*rest.Config) error {
	return func(c *rest.Config) error {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return boundedCalls{next: rt, timeout: timeout, ceiling: ceiling}
		})
		return nil
	}
}

type boundedCalls struct {
	next    http.RoundTripper
	timeout time.Duration
	ceiling int64
}

func (b boundedCalls) RoundTrip(req *http.Request) (*http.Response, error) {
	if w := req.URL.Query().Get("watch"); w == "true" || w == "1" { // watches are not bounded
		return b.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), b.timeout)
	resp, err := b.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		if ctx.Err() == context.DeadlineExceeded && req.Context().Err() == nil {
			return nil, fmt.Errorf("%s %s: the plane did not answer within %s", req.Method, req.URL.Redacted(), b.timeout)
		}
		return nil, err
	}
	if resp.ContentLength > b.ceiling {
		_ = resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("%s %s: the plane's answer is %d bytes, over the ceiling of %d", req.Method, req.URL.Redacted(), resp.ContentLength, b.ceiling)
	}
	resp.Body = &cappedBody{body: resp.Body, left: b.ceiling, cancel: cancel, what: req.Method + " " + req.URL.Redacted()}
	return resp, nil
}

// WrappedRoundTripper lets client-go's transport debugging see through the wrapper.
func (b boundedCalls) WrappedRoundTripper() http.RoundTripper { return b.next }

// cappedBody fails past left more bytes; closing it ends the request's deadline.
type cappedBody struct {
	body   io.ReadCloser
	left   int64
	cancel context.CancelFunc
	what   string
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, fmt.Errorf("%s: the plane's answer is over the ceiling", c.what)
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.body.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return 0, fmt.Errorf("%s: the plane's answer is over the ceiling", c.what)
	}
	return n, err
}

func (c *cappedBody) Close() error {
	err := c.body.Close()
	c.cancel()
	return err
}
