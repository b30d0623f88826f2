package resync

import (
	"fmt"
	"slices"
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
	Owner     anchor.Owner // the decoded owner; zero for a malformed anchor
	Labels    map[string]string
	Age       time.Duration
	Verdict
	Action     Action
	Dependents []string // names the anchor's dependents, when they were read
	Detail     string   // adds what an operator needs to act (an error, the enqueued owner)
}

// PassReport is what one pass over one project found and did.
type PassReport struct {
	Project     string
	Holder      string
	Start       time.Time
	Duration    time.Duration // measured on the real clock
	Plane       PlaneState
	PlaneDetail string // explains Plane
	Halt        string // "" or the reason deletions halted (HaltCeiling, HaltPlaneChanged)
	// DryRun, Excluded and SwitchedOff say why Collect decisions were not acted on.
	DryRun, Excluded, SwitchedOff bool
	Aborted                       string // set when the pass ended early (project lost, not admitted)
	Anchors                       []AnchorReport
	APICalls                      int       // counts the requests the pass made, hub and project
	PendingConfirmation           time.Time // when a proof of this pass can first be confirmed (or zero)
	Retired                       bool      // no kubeconfig Secret, and a tombstone retires the project
	ClaimsReleased                []string  // names the hostname claims released (dry-run or off: to release)
}

// Count returns how many anchors got decision d.
func (r PassReport) Count(d Decision) int {
	return r.count(func(a AnchorReport) bool { return a.Decision == d })
}

// CountAction returns how many anchors got action a.
func (r PassReport) CountAction(a Action) int {
	return r.count(func(x AnchorReport) bool { return x.Action == a })
}

func (r PassReport) count(match func(AnchorReport) bool) int {
	n := 0
	for _, a := range r.Anchors {
		if match(a) {
			n++
		}
	}
	return n
}

// Find returns the report line of the anchor named name, if any.
func (r PassReport) Find(name string) (AnchorReport, bool) {
	if i := slices.IndexFunc(r.Anchors, func(a AnchorReport) bool { return a.Name == name }); i >= 0 {
		return r.Anchors[i], true
	}
	return AnchorReport{}, false
}

// ownerRef names an owner in tables, logs and details: "Kind namespace/name".
func ownerRef(o anchor.Owner) string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }
