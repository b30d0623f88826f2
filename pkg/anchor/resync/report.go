package resync

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// collectionNote is an Event's note about a collected anchor: enough to recreate it by
// re-reconciling the owner.
func collectionNote(it *item) string {
	labels := make([]string, 0, len(it.obj.Labels))
	for k, v := range it.obj.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	deps := "none"
	if len(it.deps) > 0 {
		deps = strings.Join(it.deps, ", ")
	}
	return fmt.Sprintf("Collected anchor %s/%s (uid %s) of %s: %s. Labels: %s. Dependents: %s.",
		it.obj.Namespace, it.obj.Name, it.obj.UID, it.owner, it.verdict.Reason, strings.Join(labels, ","), deps)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// warn raises a Warning Event on the project's Secret.
func (p *pass) warn(reason, format string, args ...any) {
	p.secretEvent(corev1.EventTypeWarning, reason, "Halt", format, args...)
}

// notice raises a Normal Event on the project's Secret.
func (p *pass) notice(reason, action, format string, args ...any) {
	p.secretEvent(corev1.EventTypeNormal, reason, action, format, args...)
}

func (p *pass) secretEvent(eventtype, reason, action, format string, args ...any) {
	if p.events == nil || p.secret == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: p.secret.Namespace, Name: p.secret.Name, UID: p.secret.UID}
	p.events.Eventf(ref, nil, eventtype, reason, action, format, args...)
}

// reportOf turns an item into its report line.
func (p *pass) reportOf(it *item) AnchorReport {
	age := p.now().Sub(it.obj.CreationTimestamp.Time)
	if age < 0 {
		age = 0
	}
	return AnchorReport{
		Namespace: it.obj.Namespace, Name: it.obj.Name, UID: it.obj.UID, Owner: it.owner, Labels: it.obj.Labels,
		Age: age, Verdict: it.verdict, Action: it.action, Dependents: it.deps, Detail: it.detail,
	}
}

// projectOfLabels is the project an anchor's labels name, "" when they name none.
func projectOfLabels(labels map[string]string) string {
	p, err := anchor.ProjectFromClusterName(labels[anchor.LabelClusterName])
	if err != nil {
		return ""
	}
	return p
}
