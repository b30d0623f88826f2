package shard

import "k8s.io/apimachinery/pkg/runtime"

// eventf records an Event about writer's protocol write only while writer is valid.
func (s *Shard) eventf(writer string, obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if !s.member.valid(writer) {
		s.log.V(1).Info("Event dropped: its writer's validity ended", "reason", reason, "writer", writer)
		return
	}
	s.events.Eventf(obj, eventtype, reason, messageFmt, args...)
}
