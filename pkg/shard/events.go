package shard

import "k8s.io/apimachinery/pkg/runtime"

// eventf records an Event about a protocol write of writer (an incarnation of this
// replica) only while writer is still valid. The write itself was sent within validity;
// an answer that arrives after validity ended describes a Lease other replicas may have
// written since, and the replicas that did report their own writes (issue 19, finding
// 10). An Event recorded in time is sent later by the recorder's broadcaster, as every
// Event is.
func (s *Shard) eventf(writer string, obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if gateEnforced && !s.member.valid(writer) {
		s.log.V(1).Info("Event dropped: its writer's validity ended", "reason", reason, "writer", writer)
		return
	}
	s.events.Eventf(obj, eventtype, reason, messageFmt, args...)
}
