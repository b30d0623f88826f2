package domain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	mcsource "sigs.k8s.io/multicluster-runtime/pkg/source"

	"anchorage/api/v1alpha"
)

// Clusters reaches a project's plane; the shard refuses projects it does not hold
// (the shape of gateway.Clusters' Project).
type Clusters interface {
	Project(ctx context.Context, project string) (cluster.Cluster, error)
}

// Admission is entered around each reconcile (gateway.Admission's shape).
type Admission interface {
	Enter(ctx context.Context, project string) (context.Context, func(), error)
}

// Prover looks for a pending Domain's token (Checker).
type Prover interface {
	TXT(ctx context.Context, v *v1alpha.DomainVerificationStatus) Outcome
	Token(ctx context.Context, v *v1alpha.DomainVerificationStatus) Outcome
}

// Reconciler runs the protocol of the package comment on one Domain of a project this
// replica holds, behind the project's admission.
type Reconciler struct {
	Clusters  Clusters
	Admission Admission
	Settings  Settings
	Prover    Prover
	Clock     clock.PassiveClock
	// NewToken returns a fresh token. Default: a random UUID.
	NewToken func() string
	// Checks counts the checks by method (dns, http) and result (the condition's
	// reason); nil counts nothing. NewChecks registers it.
	Checks *prometheus.CounterVec
}

// NewChecks registers anchorage_domain_checks_total with reg.
func NewChecks(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anchorage_domain_checks_total",
		Help: "Checks of pending Domains' tokens, by method (dns, http) and result (the condition's reason).",
	}, []string{"method", "result"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("registering the Domain checks counter: %w", err)
	}
	return c, nil
}

// count counts one check's outcome.
func (r *Reconciler) count(method string, o Outcome) {
	if r.Checks != nil {
		r.Checks.WithLabelValues(method, o.Reason).Inc()
	}
}

// Reconcile validates the Domain, gives it a proof, checks it when due, writes the status
// and comes back when the next check is due.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	project := string(req.ClusterName)
	ctx, release, err := r.Admission.Enter(ctx, project)
	if err != nil {
		var retry interface{ RetryAfter() time.Duration }
		if errors.As(err, &retry) {
			return reconcile.Result{RequeueAfter: retry.RetryAfter()}, nil
		}
		return reconcile.Result{}, ignoreNotHeld(err)
	}
	defer release()
	cl, err := r.Clusters.Project(ctx, project)
	if err != nil {
		return reconcile.Result{}, ignoreNotHeld(err)
	}
	d := &v1alpha.Domain{}
	if err := cl.GetClient().Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := d.DeepCopy()
	now := r.Clock.Now()
	next := r.advance(ctx, d, now)
	if !equality.Semantic.DeepEqual(before.Status, d.Status) {
		// Optimistic lock: a cache that has not seen the last write (a token issued)
		// must not issue a second token over it; the conflict is retried on a fresh read.
		if err := cl.GetClient().Status().Patch(ctx, d, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, fmt.Errorf("writing the status of Domain %s: %w", req.NamespacedName, err)
		}
		if ToState(d, now) == Verified && ToState(before, now) != Verified {
			logf.FromContext(ctx).Info("Domain verified", "project", project, "domain", d.Spec.DomainName)
			cl.GetEventRecorder("anchorage-domain").Eventf(d, nil, corev1.EventTypeNormal, v1alpha.DomainReasonVerified, "Verifying", "%s", "Domain "+d.Spec.DomainName+" verified")
		}
	}
	if next.IsZero() {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: max(next.Sub(now), time.Millisecond)}, nil
}

// advance moves d one step through the protocol at now; it returns when to come back
// (zero: not until d changes).
func (r *Reconciler) advance(ctx context.Context, d *v1alpha.Domain, now time.Time) time.Time {
	if !Validate(d, now) {
		return time.Time{}
	}
	switch ToState(d, now) {
	case NeedsProof:
		token := uuid.NewString() // random (version 4): a token must not be guessable
		if r.NewToken != nil {
			token = r.NewToken()
		}
		IssueProof(d, r.Settings, token, now)
		return now
	case Waiting:
		return d.Status.Verification.NextVerificationAttempt.Time
	case Due:
		dns := r.Prover.TXT(ctx, d.Status.Verification)
		r.count("dns", dns)
		var http Outcome
		if !dns.Found {
			http = r.Prover.Token(ctx, d.Status.Verification)
			r.count("http", http)
		}
		return Record(d, r.Settings, dns, http, now, nil)
	}
	return time.Time{}
}

func ignoreNotHeld(err error) error {
	if errors.Is(err, multicluster.ErrClusterNotFound) {
		return nil
	}
	return err
}

// Setup adds the Domain controller to mgr. watch wraps its per-project source (the
// gateway path's deferred watches, so an idle project watches no Domains).
func Setup(mgr mcmanager.Manager, r *Reconciler, workers int, watch func(mcsource.TypedSource[client.Object, mcreconcile.Request]) mcsource.TypedSource[client.Object, mcreconcile.Request]) error {
	ctrl, err := mccontroller.New("domain", mgr, mccontroller.Options{
		Reconciler:              r,
		MaxConcurrentReconciles: workers,
		SkipNameValidation:      mgr.GetControllerOptions().SkipNameValidation,
	})
	if err != nil {
		return fmt.Errorf("setting up the Domain controller: %w", err)
	}
	src := mcsource.TypedKind[client.Object, mcreconcile.Request](&v1alpha.Domain{}, func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return mchandler.ForCluster(&handler.EnqueueRequestForObject{}, name)
	})
	return ctrl.MultiClusterWatch(watch(src))
}
