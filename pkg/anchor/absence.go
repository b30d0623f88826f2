package anchor

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NotFoundProvesAbsence reports whether err is a NotFound that proves the object gr/name
// is absent: the API server's own answer, with details naming that resource and name.
// Every decision that deletes or gives up on an object because it is gone goes through
// here. Three NotFounds prove nothing about the object and are refused:
//   - a 404 for a kind the server does not serve (its CRD deleted, a group never
//     served): it carries no name, or, through clients that fill in what they asked
//     for, a cause saying the response was not a status;
//   - a write into a namespace that no longer exists, refused with a NotFound naming
//     the namespace, not the object;
//   - any error that is not an API status at all.
func NotFoundProvesAbsence(err error, gr schema.GroupResource, name string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	s := status.Status()
	if s.Reason != metav1.StatusReasonNotFound || s.Details == nil {
		return false
	}
	d := s.Details
	for _, c := range d.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return false
		}
	}
	return d.Name == name && d.Group == gr.Group && d.Kind == gr.Resource
}
