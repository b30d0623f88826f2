package gateway

import (
	"context"
	"fmt"
	"unicode/utf8"

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

// maxMessage bounds a condition message or an Event note: a huge error from a plane
// must not make the write fail, and the events API refuses notes over 1 KiB.
const maxMessage = 1000

// boundedMessage returns s cut to maxMessage bytes on a rune boundary, saying so.
func boundedMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	const mark = " … (truncated)"
	cut := maxMessage - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
