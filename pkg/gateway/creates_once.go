package gateway

import (
	"net/http"
)

// SendCreatesOnce wraps the transport of the reconcilers' hub client (rest.Config.Wrap)
// so each create reaches the hub at most once per live guard: it strips Retry-After
// from a create's 429 or 5xx, which client-go would resend past the guard's read
// (docs/design.md, Residual windows, 4). Other verbs keep client-go's retry.
func SendCreatesOnce(rt http.RoundTripper) http.RoundTripper {
	return createsOnceTransport{next: rt}
}

type createsOnceTransport struct{ next http.RoundTripper }

func (t createsOnceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost && retriedByClientGo(resp.StatusCode) {
		resp.Header = resp.Header.Clone()
		resp.Header.Del("Retry-After")
	}
	return resp, err
}

// retriedByClientGo reports whether client-go resends a request answered with code and
// a Retry-After.
func retriedByClientGo(code int) bool {
	return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
}

// WrappedRoundTripper lets client-go reach the real transport to cancel requests.
func (t createsOnceTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
