package resync

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// admittedEvents records an Event only while the project is admitted (docs/design.md,
// Open work, item 2); the broadcaster sends it later.
type admittedEvents struct {
	admission Admission
	project   string
	next      events.EventRecorder
}

func (a admittedEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	_, release, err := a.admission.Enter(context.Background(), a.project)
	if err != nil {
		return
	}
	defer release()
	a.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// secretEvent raises an Event on the project's Secret.
func (p *pass) secretEvent(eventtype, reason, action, format string, args ...any) {
	if p.events == nil || p.secret == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: p.secret.Namespace, Name: p.secret.Name, UID: p.secret.UID}
	p.events.Eventf(ref, nil, eventtype, reason, action, format, args...)
}

// anchorEvent raises an Event on an anchor, its note cut to 1000 bytes.
func (p *pass) anchorEvent(it *item, eventtype, reason, action, note string) {
	if len(note) > 1000 {
		note = note[:997] + "..."
	}
	if p.events != nil {
		ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: it.obj.Namespace, Name: it.obj.Name, UID: it.obj.UID}
		p.events.Eventf(ref, nil, eventtype, reason, action, "%s", note)
	}
}

// collectionNote is an Event's note about a collected anchor: enough to recreate it by
// re-reconciling the owner.
func collectionNote(it *item) string {
	deps := "none"
	if len(it.deps) > 0 {
		deps = strings.Join(it.deps, ", ")
	}
	return fmt.Sprintf("Collected anchor %s/%s (uid %s) of %s: %s. Labels: %s. Dependents: %s.",
		it.obj.Namespace, it.obj.Name, it.obj.UID, it.owner, it.verdict.Reason, labels.Set(it.obj.Labels), deps)
}
