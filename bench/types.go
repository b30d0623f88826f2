// Package bench measures anchorage against multicluster-runtime's sharded coordinator
// (coordinator/sharded, v0.23.3) on the same reconcilers, load and faults: see
// bench/README.md. Nothing here is imported by the product.
package bench

import (
	"time"

	"anchorage/pkg/shard"
)

// Coordinator names what assigns projects to replicas in a run.
type Coordinator string

const (
	// Anchorage is pkg/shard, the product (bin/manager).
	Anchorage Coordinator = "anchorage"
	// Sharded is multicluster-runtime's coordinator/sharded (bench/cmd/baseline-manager).
	Sharded Coordinator = "mcr-sharded"
	// AnchorageNoGate is the manager with bench/mutants/nogate.patch: admission
	// and the hub writer no longer check validity. It never ships; it shows the
	// smoke gate can fail.
	AnchorageNoGate Coordinator = "anchorage-nogate"
	// AnchorageSuspectExpires is the manager with bench/mutants/suspectexpires.patch:
	// the old rule (a member the coordinator has not
	// seen renew for a Lease duration loses its projects in the same pass). It never
	// ships; it shows the hub-faults smoke gate catches the second owner that follows.
	AnchorageSuspectExpires Coordinator = "anchorage-suspectexpires"
)

// Scenario names a fault schedule.
type Scenario string

const (
	ScenarioKill    Scenario = "kill"    // SIGKILL a replica, later the coordinator (anchorage) / another replica
	ScenarioPause   Scenario = "pause"   // SIGSTOP a replica past the member-Lease duration, then SIGCONT
	ScenarioScale   Scenario = "scale"   // 3 -> 4 -> 2 replicas (graceful stops)
	ScenarioRolling Scenario = "rolling" // every replica replaced one at a time (SIGTERM, new pod)
	// ScenarioHubFaults: a seeded random schedule of hub faults (bench/hubfaults.go)
	ScenarioHubFaults Scenario = "hub-faults"
	// ScenarioSkew runs replicas whose clocks are 60 s ahead, 60 s behind and on time
	// (SkewOffsets; the build with bench/mutants/skew.patch), then pauses one as
	// pause does and kills two as kill does.
	ScenarioSkew Scenario = "skew"
)

// Record is one reconcile (one admitted unit of work) as a replica wrote it to its
// record file (--record-file), one JSON object per line.
type Record = shard.Record

// Fault is one scheduled fault, as the runner applied it.
type Fault struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"` // kill, stop, cont, term, start, or a HubFaultKind
	Replica string    `json:"replica"`
	// Detail says what a hub fault did and to whom.
	Detail string `json:"detail,omitempty"`
	// Project is the project a hub fault aimed at (its Lease deleted or re-created);
	// For how long a lasting hub fault lasted.
	Project string        `json:"project,omitempty"`
	For     time.Duration `json:"for,omitempty"`
	// Coordinator is true when the replica was the elected coordinator (anchorage).
	Coordinator bool `json:"coordinator,omitempty"`
}

// Overlap is two holders' reconciles of one project that intersect in time. A and B
// name the replicas, or the holders ("<replica>/<incarnation>") when both are
// incarnations of one replica.
type Overlap struct {
	Project string        `json:"project"`
	A       string        `json:"a"`
	B       string        `json:"b"`
	Start   time.Time     `json:"start"`
	Length  time.Duration `json:"length"`
	// Frozen: one of the two reconciles was in flight when its replica was stopped
	// (SIGSTOP). Nobody can stop such work; what must hold is that it writes nothing
	// once its validity has passed (LateWrite). Overlaps of work admitted after a wake
	// are not frozen: the gate must prevent them.
	Frozen bool `json:"frozen,omitempty"`
}

// LateWrite is a write the API server committed after its writer's validity ended,
// from the audit log (not from the replica's own records).
type LateWrite struct {
	Replica    string        `json:"replica"`
	Project    string        `json:"project"`
	Plane      string        `json:"plane"` // hub or the project's plane
	Verb       string        `json:"verb"`
	Resource   string        `json:"resource"`
	Namespace  string        `json:"namespace"`
	Name       string        `json:"name"`
	At         time.Time     `json:"at"`
	ValidUntil time.Time     `json:"validUntil"` // zero: the writer never held validity for the project
	Late       time.Duration `json:"late"`
}

// HandOver is one project changing hands after a fault: from the fault to the first
// reconcile by another replica.
type HandOver struct {
	Project  string        `json:"project"`
	From     string        `json:"from"`
	To       string        `json:"to"`
	Planned  bool          `json:"planned"`
	OfCoord  bool          `json:"ofCoordinator"` // the replica that failed was the coordinator
	At       time.Time     `json:"at"`
	Duration time.Duration `json:"duration"`
}

// Sample is the number of projects each replica owned (per the coordinator's own
// Leases) at one instant.
type Sample struct {
	At    time.Time      `json:"at"`
	Owned map[string]int `json:"owned"`
}

// ScenarioResult is one coordinator through one scenario.
type ScenarioResult struct {
	Coordinator   Coordinator   `json:"coordinator"`
	Scenario      Scenario      `json:"scenario"`
	Projects      int           `json:"projects"`
	Replicas      int           `json:"replicas"`
	LeaseDuration time.Duration `json:"leaseDuration"`
	Start         time.Time     `json:"start"`
	End           time.Time     `json:"end"`
	Records       int           `json:"records"`
	Faults        []Fault       `json:"faults"`
	Overlaps      []Overlap     `json:"overlaps"`
	LateWrites    []LateWrite   `json:"lateWrites"`
	// Writes is how many non-Lease writes the replicas committed (the denominator).
	Writes    int        `json:"writes"`
	HandOvers []HandOver `json:"handOvers"`
	// HandOversMissing counts projects whose owner failed and that no other replica
	// reconciled before the scenario ended.
	HandOversMissing int `json:"handOversMissing"`
	// ProxiesDeleted is how many HTTPProxies the load deleted; AnchorsLeft how many of
	// their anchors were still on the hub after the settle time.
	ProxiesDeleted int `json:"proxiesDeleted"`
	AnchorsLeft    int `json:"anchorsLeft"`
	// WrongfulDeletions counts anchors deleted (per the hub's audit log) while their
	// HTTPProxy still existed.
	WrongfulDeletions int `json:"wrongfulDeletions"`
	// CreatesAfterDeletion are the hub objects created for a proxy later than its
	// delete + DeletionTolerance and not in the live guard's window; HubCreatesChecked
	// how many hub creates for deleted proxies were compared; CreatesInGuardWindow how
	// many later than the tolerance came within GuardWindow of a read of the proxy begun
	// before its delete committed (CreatesAfterDeletion).
	CreatesAfterDeletion []LateCreate `json:"createsAfterDeletion"`
	HubCreatesChecked    int          `json:"hubCreatesChecked"`
	CreatesInGuardWindow int          `json:"createsInGuardWindow"`
	// ClockOffsets are the replicas' clock offsets (the skew scenario; none is 0).
	ClockOffsets map[string]time.Duration `json:"clockOffsets,omitempty"`
	// PrematureHandOvers are failure hand-overs of replicas that had not failed
	// (anchorage only: a member declared expired, a project moved without its
	// holder's write, while the replica was neither killed, stopped nor just woken).
	PrematureHandOvers []PrematureHandOver `json:"prematureHandOvers"`
	Timeline           []Sample            `json:"timeline"`
	Errors             []string            `json:"errors,omitempty"`
	// HubFaultSeed is the seed a hub-faults run drew its schedule from (replay it with
	// bin/bench --hub-faults-seed).
	HubFaultSeed uint64 `json:"hubFaultSeed,omitempty"`
	// Recovery is how long after a hub-faults schedule's faults were lifted every project
	// was owned again; NotRecovered is set when that did not happen within OwnedWithin.
	Recovery     time.Duration `json:"recovery,omitempty"`
	NotRecovered bool          `json:"notRecovered,omitempty"`
}

// LeaseLoad is the steady-state Lease write rate for P projects.
type LeaseLoad struct {
	Coordinator Coordinator `json:"coordinator"`
	Projects    int         `json:"projects"`
	Replicas    int         `json:"replicas"`
	// Unowned is how many projects still had no owner when the window opened; a load
	// that did not converge is reported but gives no rate.
	Unowned   int           `json:"unowned"`
	Window    time.Duration `json:"window"`
	Writes    int           `json:"writes"`
	PerSecond float64       `json:"perSecond"`
}

// Memory is the peak RSS of R replicas sharing P projects, and of one replica holding
// none.
type Memory struct {
	Coordinator Coordinator `json:"coordinator"`
	Projects    int         `json:"projects"`
	Replicas    int         `json:"replicas"`
	// PeakRSS is each replica's VmHWM in bytes.
	PeakRSS []uint64 `json:"peakRSS"`
	// ZeroProjectRSS is the VmHWM of a replica of the same binary holding no project.
	ZeroProjectRSS uint64 `json:"zeroProjectRSS"`
	// ProjectBytes is the mean over replicas of PeakRSS minus ZeroProjectRSS.
	ProjectBytes float64 `json:"projectBytes"`
}

// Report is one run of the harness.
type Report struct {
	Started       time.Time        `json:"started"`
	Finished      time.Time        `json:"finished"`
	Smoke         bool             `json:"smoke"`
	Machine       string           `json:"machine"`
	LeaseDuration time.Duration    `json:"leaseDuration"`
	Notes         []string         `json:"notes"`
	Scenarios     []ScenarioResult `json:"scenarios"`
	LeaseLoad     []LeaseLoad      `json:"leaseLoad"`
	Memory        []Memory         `json:"memory"`
	// DataPath is the data-path section, one result per coordinator.
	DataPath []DataPathResult `json:"dataPath,omitempty"`
	// Failover is the failure hand-over of 1,000 light projects on a delayed hub, one
	// result per coordinator.
	Failover []Failover `json:"failover,omitempty"`
	// FairShare is one hostile project beside normal ones (anchorage only).
	FairShare *FairShareResult `json:"fairShare,omitempty"`
}

// Failover is a failure hand-over of many lightweight projects on a slow hub: a replica
// that holds projects and is not anchorage's coordinator is SIGKILLed, and each of its
// projects is timed from the kill until a live replica owns it.
type Failover struct {
	Coordinator Coordinator `json:"coordinator"`
	Projects    int         `json:"projects"`
	Replicas    int         `json:"replicas"`
	// HubDelay is how much later every hub answer reached every replica.
	HubDelay time.Duration `json:"hubDelay"`
	// OwnedAfter is how long after the projects appeared every one was owned.
	OwnedAfter time.Duration `json:"ownedAfter"`
	Victim     string        `json:"victim"`
	// VictimProjects is how many projects the victim owned at the kill; Missing how
	// many of them no live replica owned within the wait.
	VictimProjects int `json:"victimProjects"`
	// MovedBeforeKill counts projects that changed owner in the Lease duration before the
	// kill: not 0 means the replicas were not steady (a membership lapsed) and the times
	// include that churn.
	MovedBeforeKill int `json:"movedBeforeKill"`
	Missing         int `json:"missing"`
	// Max and Median are over the taken-over projects; Sample is the ownership sampling
	// period (each time overstates by up to one period).
	Max    time.Duration `json:"max"`
	Median time.Duration `json:"median"`
	Sample time.Duration `json:"sample"`
	// Bound is FailureBound of the replicas' timings, whose Lease lasts LeaseDuration.
	Bound         time.Duration `json:"bound"`
	LeaseDuration time.Duration `json:"leaseDuration"`
	// CallTimeout is set when the run replaced FastTimings' call timeout (a diagnostic).
	CallTimeout time.Duration `json:"callTimeout,omitempty"`
	Error       string        `json:"error,omitempty"`
}
