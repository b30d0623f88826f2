package gateway

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
)

func TestEventsWithinDropsEventsOnceTheAdmittedContextEnds(t *testing.T) {
	fake := events.NewFakeRecorder(4)
	ctx, end := context.WithCancel(context.Background())
	rec := admittedEvents{ctx: ctx, next: fake}
	obj := &corev1.ConfigMap{}
	rec.Eventf(obj, nil, corev1.EventTypeNormal, "Programmed", "Programming", "within validity")
	end()
	rec.Eventf(obj, nil, corev1.EventTypeWarning, "HubWriteFailed", "Programming", "after validity")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	if len(got) != 1 || got[0] != "Normal Programmed within validity" {
		t.Errorf("events sent: %q, want only the one recorded within validity", got)
	}
}
