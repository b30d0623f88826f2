package gateway

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// eventsWithin limits rec to ctx: an event recorded after ctx has ended is dropped. The
// reconcilers pass their admitted context, which ends when the holder's validity does,
// so a replica whose validity lapsed mid-reconcile reports nothing more about a project
// another replica may hold by now (issue 19, finding 10). An event recorded in time is
// still sent later by the recorder's broadcaster: Events are descriptions, not project
// state, and that window is the one docs/design.md lists for every write.
func eventsWithin(ctx context.Context, rec events.EventRecorder) events.EventRecorder {
	return admittedEvents{ctx: ctx, next: rec}
}

type admittedEvents struct {
	ctx  context.Context
	next events.EventRecorder
}

func (a admittedEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if a.ctx.Err() != nil {
		return
	}
	a.next.Eventf(regarding, related, eventtype, reason, action, "%s", boundedMessage(fmt.Sprintf(note, args...)))
}
