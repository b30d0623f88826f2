package resync

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// unreachable reports whether a failed read counts toward the plane being unreachable:
// transport errors, timeouts, 5xx and 401 do; 403, 404, 429 and other client errors do
// not (docs/design.md, Unknown, and charging failures to what failed).
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusUnauthorized || code >= http.StatusInternalServerError ||
			apierrors.IsUnauthorized(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
	}
	// Anything else but a missing mapping is the transport or a timeout.
	return !meta.IsNoMatchError(err)
}
