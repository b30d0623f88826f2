package gateway

import (
	"net/http"
)

// SendCreatesOnce wraps the transport of the hub client the reconcilers write with
// (rest.Config.Wrap) so that each create reaches the hub at most once per live guard.
//
// client-go sends a request again, after the wait the answer names, when the API server
// answers 429 or 5xx with a Retry-After (API Priority and Fairness under load, an API
// server shutting down). For a create that happens after the live guard's read (the
// guard runs before Create is called, not before each attempt): a delete of the proxy
// committed during the wait does not stop it, and the hub gets an object for a proxy
// already gone (docs/design.md, Gateway path). Without the Retry-After on a create's
// answer, client-go returns the error instead; the reconcile fails and comes again
// through its workqueue's backoff, and its guard reads the owners again before the next
// create. Other verbs keep client-go's retry: an update or delete carries its own
// precondition (a resourceVersion, a UID).
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
