package gateway

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// eventsWithin limits rec to ctx, the admitted context: an event recorded after it
// ended is dropped, and every note is bounded (docs/design.md, Open work, 2).
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
