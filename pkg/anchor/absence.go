package anchor

import (
	"errors"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NotFoundProvesAbsence reports whether err is a NotFound proving gr/name absent: a status
// whose details name that resource and name, and no cause saying the response was not a
// status (docs/design.md, Proofs of absence). Every decision that an object is gone uses it.
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
	notStatus := func(c metav1.StatusCause) bool { return c.Type == metav1.CauseTypeUnexpectedServerResponse }
	return !slices.ContainsFunc(d.Causes, notStatus) && d.Name == name && d.Group == gr.Group && d.Kind == gr.Resource
}
