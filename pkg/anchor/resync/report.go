package resync

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"anchorage/pkg/anchor"
)

// Action is what a pass did about an anchor beyond deciding.
type Action string

const (
	ActionNone               Action = ""                    // nothing beyond deciding
	ActionDeleted            Action = "deleted"             // deleted; the garbage collector takes its dependents
	ActionDryRun             Action = "dry-run"             // would have been deleted; dry-run
	ActionSwitchedOff        Action = "switched-off"        // would have been deleted; the runtime switch is off
	ActionExcluded           Action = "excluded"            // would have been deleted; the Secret excludes the project
	ActionDeferred           Action = "deferred"            // over this pass's cap; a later pass deletes it
	ActionHalted             Action = "halted"              // deletions halted this pass (ceiling)
	ActionFailed             Action = "failed"              // the delete failed (a conflict: the anchor changed)
	ActionOwnerEnqueued      Action = "owner-enqueued"      // a claiming live owner was asked to re-attach
	ActionAlreadyTerminating Action = "already-terminating" // already being deleted; skipped
)

var collectActions = []Action{ActionDeleted, ActionDryRun, ActionSwitchedOff, ActionExcluded, ActionDeferred, ActionHalted, ActionFailed, ActionAlreadyTerminating}

// AnchorReport is one anchor's line in a pass report.
type AnchorReport struct {
	Namespace string
	Name      string
	UID       types.UID
	// Owner is the decoded owner; zero for a malformed anchor.
	Owner  anchor.Owner
	Labels map[string]string
	Age    time.Duration
	Verdict
	Action Action
	// Dependents names the anchor's dependents, when they were read.
	Dependents []string
	// Detail adds what an operator needs to act (an error, the enqueued owner).
	Detail string
}

// PassReport is what one pass over one project found and did.
type PassReport struct {
	Project string
	Holder  string
	Start   time.Time
	// Duration is measured on the real clock.
	Duration time.Duration
	Plane    PlaneState
	// PlaneDetail explains Plane.
	PlaneDetail string
	// Halt is "" or the reason deletions halted (HaltCeiling, HaltPlaneChanged).
	Halt string
	// DryRun, Excluded and SwitchedOff say why Collect decisions were not acted on.
	DryRun, Excluded, SwitchedOff bool
	// Aborted is set when the pass ended early (project lost, not admitted).
	Aborted string
	Anchors []AnchorReport
	// APICalls counts the requests the pass made, hub and project.
	APICalls int
	// PendingConfirmation is when a proof of this pass can first be confirmed (or zero).
	PendingConfirmation time.Time
	// Retired: no kubeconfig Secret, and a tombstone retires the project.
	Retired bool
	// ClaimsReleased names the hostname claims released (dry-run or off: to release).
	ClaimsReleased []string
}

// Count returns how many anchors got decision d.
func (r PassReport) Count(d Decision) int {
	n := 0
	for _, a := range r.Anchors {
		if a.Decision == d {
			n++
		}
	}
	return n
}

// CountAction returns how many anchors got action a.
func (r PassReport) CountAction(a Action) int {
	n := 0
	for _, x := range r.Anchors {
		if x.Action == a {
			n++
		}
	}
	return n
}

// Find returns the report line of the anchor named name, if any.
func (r PassReport) Find(name string) (AnchorReport, bool) {
	for _, a := range r.Anchors {
		if a.Name == name {
			return a, true
		}
	}
	return AnchorReport{}, false
}

// ownerRef names an owner in tables, logs and details: "Kind namespace/name".
func ownerRef(o anchor.Owner) string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }
