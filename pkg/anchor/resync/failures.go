package resync

import (
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// forbiddenDetail names the permission a 403 says the manager lacks, for the report.
func forbiddenDetail(verb string, gr schema.GroupResource, namespace string) string {
	where := "in namespace " + namespace
	if namespace == "" {
		where = "at cluster scope"
	}
	return fmt.Sprintf("forbidden: the manager may not %s %s %s on the project's plane; anchors of this kind stay unknown until it may", verb, gr.String(), where)
}

// notConfiguredDetail names what reading owners of gk would take, for the report.
func notConfiguredDetail(gk schema.GroupKind) string {
	return fmt.Sprintf("kind-not-configured: the resync reads %s owners on no plane (add it to --resync-owner-kinds, and get on it to the plane's role, anchorage-project); anchors of this kind stay unknown until then", gk.String())
}
