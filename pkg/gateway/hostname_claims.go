package gateway

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
	"anchorage/pkg/domain"
)

// ReasonHostnamesInUse: another Gateway holds the hostname (listener, Gateway, proxy).
const ReasonHostnamesInUse = "HostnamesInUse"

// ReasonUnverifiedHostname: no Verified Domain covers the hostname (listener), the
// previous manager's reason.
const ReasonUnverifiedHostname = "UnverifiedHostname"

// claimRetryAfter is how soon a refused Gateway tries again (releases are not watched).
const claimRetryAfter = 30 * time.Second

// claimOwnerKey is the data key naming the claimant, as the previous manager wrote it.
const claimOwnerKey = "owner"

// claimant is the Gateway a hostname claim is for (docs/design.md, Hostname claims).
type claimant struct {
	project, namespace, name string
}

func claimantOf(project string, gw *gatewayv1.Gateway) claimant {
	return claimant{project: project, namespace: gw.Namespace, name: gw.Name}
}

// labels are the claim's labels: the three the previous manager wrote.
func (c claimant) labels() map[string]string {
	return map[string]string{
		anchor.LabelClusterName: anchor.ClusterNameValue(c.project),
		anchor.LabelNamespace:   c.namespace,
		anchor.LabelName:        c.name,
	}
}

// holds reports whether claim's labels name this claimant (cluster-name decoded,
// legacy forms included). The data is not read: the previous manager's form differs.
func (c claimant) holds(claim *corev1.ConfigMap) bool {
	l := claim.Labels
	if l[anchor.LabelNamespace] != c.namespace || l[anchor.LabelName] != c.name {
		return false
	}
	p, err := anchor.ProjectFromClusterName(l[anchor.LabelClusterName])
	return err == nil && p == c.project
}

// claimable reports whether a listener hostname can be claimed: not a wildcard, wherever
// its "*" stands (a schema loosened on the plane lets a tenant write one anywhere).
func claimable(host gatewayv1.Hostname) bool {
	return host != "" && !strings.Contains(string(host), "*")
}

// refusal is why a listener hostname is not programmed: a listener condition reason
// and a message.
type refusal struct{ reason, why string }

// refusedHostnames maps each listener hostname not programmed to why.
type refusedHostnames map[gatewayv1.Hostname]refusal

// programmable returns gw without its refused listeners (a hostname-less one is
// refused under "").
func (r refusedHostnames) programmable(gw *gatewayv1.Gateway) *gatewayv1.Gateway {
	if len(r) == 0 {
		return gw
	}
	out := gw.DeepCopy()
	out.Spec.Listeners = slices.DeleteFunc(out.Spec.Listeners, func(l gatewayv1.Listener) bool {
		_, no := r[ptr.Deref(l.Hostname, "")]
		return no
	})
	return out
}

// hostnameClaims reads and writes the claims in one hub namespace, live.
type hostnameClaims struct {
	hub client.Client
	ns  string
}

// held lists the claims c holds (label-selected), by hostname.
func (h hostnameClaims) held(ctx context.Context, c claimant) (map[string]*corev1.ConfigMap, error) {
	list := &corev1.ConfigMapList{}
	labels := c.labels()
	delete(labels, anchor.LabelClusterName) // legacy spellings: checked by holds
	if err := h.hub.List(ctx, list, client.InNamespace(h.ns), client.MatchingLabels(labels)); err != nil {
		return nil, fmt.Errorf("listing the hostname claims of %s/%s in %s: %w", c.namespace, c.name, h.ns, err)
	}
	out := map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		if c.holds(&list.Items[i]) {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out, nil
}

// claim claims every listener hostname of gw for c that it does not hold yet and that
// is not refused already (unverified); one another claimant holds, or a wildcard, is
// refused. Nothing of another's is written. It returns the claims this call took (or
// found its own though held did not list them), by hostname, for release should the
// hub refuse the write they were taken for.
func (h hostnameClaims) claim(ctx context.Context, c claimant, gw *gatewayv1.Gateway, held map[string]*corev1.ConfigMap, refused refusedHostnames) (refusedHostnames, map[string]*corev1.ConfigMap, error) {
	taken := map[string]*corev1.ConfigMap{}
	seen := map[gatewayv1.Hostname]bool{} // an HTTP and an HTTPS listener share a hostname
	for _, l := range gw.Spec.Listeners {
		if l.Hostname == nil || seen[*l.Hostname] {
			continue
		}
		host := *l.Hostname
		seen[host] = true
		if _, no := refused[host]; no {
			continue
		}
		if !claimable(host) {
			refused[host] = refusal{ReasonHostnamesInUse, fmt.Sprintf("hostname %s is a wildcard: it would cover hostnames other projects hold, so it is not programmed", host)}
			continue
		}
		if held[string(host)] != nil {
			continue
		}
		claim, err := h.create(ctx, c, string(host))
		if err != nil {
			return refused, taken, err
		}
		if claim == nil {
			refused[host] = refusal{ReasonHostnamesInUse, fmt.Sprintf("hostname %s is already programmed for another Gateway", host)}
			continue
		}
		taken[string(host)] = claim
	}
	return refused, taken, nil
}

// create writes c's claim on host, creating the namespace on first use, and returns
// it; nil means another claimant holds it.
func (h hostnameClaims) create(ctx context.Context, c claimant, host string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: host, Labels: c.labels()},
		Data:       map[string]string{claimOwnerKey: c.project + "/" + c.namespace + "/" + c.name},
	}
	err := h.hub.Create(ctx, cm)
	if apierrors.IsNotFound(err) {
		if nsErr := h.hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}); nsErr != nil && !apierrors.IsAlreadyExists(nsErr) {
			return nil, fmt.Errorf("creating the hostname claims namespace %s: %w", h.ns, nsErr)
		}
		err = h.hub.Create(ctx, cm)
	}
	if err == nil {
		logf.FromContext(ctx).Info("Claimed hostname", "hostname", host)
		return cm, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("claiming hostname %s: %w", host, err)
	}
	existing := &corev1.ConfigMap{}
	if err := h.hub.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: host}, existing); err != nil {
		return nil, client.IgnoreNotFound(fmt.Errorf("reading the claim of hostname %s: %w", host, err))
	}
	if !c.holds(existing) {
		return nil, nil
	}
	return existing, nil
}

// releaseUnless deletes held's claims not in keep, on UID and resourceVersion.
func (h hostnameClaims) releaseUnless(ctx context.Context, held map[string]*corev1.ConfigMap, keep map[string]bool) error {
	for host, claim := range held {
		if keep[host] {
			continue
		}
		uid, rv := claim.UID, claim.ResourceVersion
		err := h.hub.Delete(ctx, claim, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing the claim of hostname %s: %w", host, err)
		}
		logf.FromContext(ctx).Info("Released hostname claim", "hostname", host, "uid", uid)
	}
	return nil
}

func listenerHostnames(gw *gatewayv1.Gateway) map[string]bool {
	out := map[string]bool{}
	for _, l := range gw.Spec.Listeners {
		if l.Hostname != nil {
			out[string(*l.Hostname)] = true
		}
	}
	return out
}

// refusedListenerStatus is the status of a listener whose hostname is not programmed.
func refusedListenerStatus(l gatewayv1.Listener, no refusal, generation int64) gatewayv1.ListenerStatus {
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: no.reason, Message: boundedMessage(no.why), ObservedGeneration: generation, LastTransitionTime: metav1.Now()}
	}
	return gatewayv1.ListenerStatus{
		Name:           l.Name,
		SupportedKinds: []gatewayv1.RouteGroupKind{{Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)), Kind: kindHTTPRoute}},
		Conditions:     []metav1.Condition{cond(string(gatewayv1.ListenerConditionAccepted)), cond(string(gatewayv1.ListenerConditionProgrammed))},
	}
}

// reportRefusedHostnames adds a refused listener status for each listener whose
// hostname is not programmed, an Event for each reason when it starts, and a requeue.
func (r *GatewayReconciler) reportRefusedHostnames(s *gatewayScope, before *gatewayv1.Gateway) {
	if len(s.refused) == 0 {
		return
	}
	hosts := map[string][]string{} // by reason
	for _, l := range withPlatformHostname(s.gw, s.canonical).Spec.Listeners {
		host := string(ptr.Deref(l.Hostname, ""))
		if no, refused := s.refused[gatewayv1.Hostname(host)]; refused {
			s.gw.Status.Listeners = append(s.gw.Status.Listeners, refusedListenerStatus(l, no, s.gw.Generation))
			if host == "" {
				host = "listener " + string(l.Name)
			}
			if !slices.Contains(hosts[no.reason], host) {
				hosts[no.reason] = append(hosts[no.reason], host)
			}
		}
	}
	notes := map[string]string{ReasonHostnamesInUse: "Not programmed, held by another Gateway or a wildcard: %s", ReasonUnverifiedHostname: "Not programmed, no Verified Domain covers them: %s",
		ReasonTooManyHostnames: "Not programmed nor claimed, the Gateway has more hostnames than it may: %s",
		ReasonHostnameRequired: "Not programmed, no hostname (it would answer every Host): %s", ReasonReservedHostname: "Not programmed, under the platform's domain: %s"}
	for reason, hs := range hosts {
		wasRefused := slices.ContainsFunc(before.Status.Listeners, func(l gatewayv1.ListenerStatus) bool {
			c := meta.FindStatusCondition(l.Conditions, string(gatewayv1.ListenerConditionProgrammed))
			return c != nil && c.Reason == reason
		})
		if !wasRefused {
			s.events.Eventf(s.gw, nil, corev1.EventTypeWarning, reason, "Programming", notes[reason], strings.Join(hs, ", "))
		}
	}
	s.requeueAfter = claimRetryAfter
}

// unverifiedHostnames adds to refused the listener hostnames of gw (s's Gateway, its
// tenant listeners) not refused yet that no Verified Domain in its namespace covers
// (domain.Gate), creating a Domain for each that no Domain covers, as the previous
// manager did. A hostname the Gateway holds a claim on stays, verified or not: what
// serves today is not dropped when its Domain goes (docs/design.md, Verified domains:
// the grace rule and what ends it).
func (r *GatewayReconciler) unverifiedHostnames(ctx context.Context, s *gatewayScope, gw *gatewayv1.Gateway, held map[string]*corev1.ConfigMap, refused refusedHostnames) error {
	var hosts []string
	for h := range listenerHostnames(gw) {
		if _, no := refused[gatewayv1.Hostname(h)]; !no && claimable(gatewayv1.Hostname(h)) && held[h] == nil {
			hosts = append(hosts, h)
		}
	}
	if !r.Config.VerifyHostnames || len(hosts) == 0 {
		return nil
	}
	domains := &v1alpha.DomainList{}
	if err := s.cluster.GetClient().List(ctx, domains, client.InNamespace(s.gw.Namespace)); err != nil {
		return fmt.Errorf("listing the Domains of namespace %s: %w", s.gw.Namespace, err)
	}
	for h, v := range domain.Gate(hosts, domains.Items) {
		if v.Verified {
			continue
		}
		refused[gatewayv1.Hostname(h)] = refusal{ReasonUnverifiedHostname, v.Message}
		if v.Create == "" {
			continue
		}
		d := &v1alpha.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: s.gw.Namespace, Name: v.Create}, Spec: v1alpha.DomainSpec{DomainName: v.Create}}
		if err := s.cluster.GetClient().Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Domain %s for hostname %s: %w", v.Create, h, err)
		}
		s.log.Info("Created a Domain for an unverified hostname", "domain", v.Create, "hostname", h)
	}
	return nil
}

// hostnameSets remembers, per Gateway, the hostnames last programmed on the hub, and
// the generation whose hub write was refused: until the Gateway changes it claims
// nothing new, so its retries never hold, even for the length of a write, a hostname
// another project is waiting for.
type hostnameSets struct {
	mu      sync.Mutex
	last    map[string]string
	refused map[string]int64
}

// rememberRefusedWrite records that the hub refused gw's current generation.
func (h *hostnameSets) rememberRefusedWrite(project string, gw *gatewayv1.Gateway) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refused == nil {
		h.refused = map[string]int64{}
	}
	h.refused[hostnameSetKey(project, gw)] = gw.Generation
}

// refusedWrite reports whether the hub refused gw's current generation; a record of
// an older generation is dropped.
func (h *hostnameSets) refusedWrite(project string, gw *gatewayv1.Gateway) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	key := hostnameSetKey(project, gw)
	gen, ok := h.refused[key]
	if ok && gen != gw.Generation {
		delete(h.refused, key)
	}
	return ok && gen == gw.Generation
}

// noticeHostnames reconciles the Gateway's routes again when its hub hostnames changed.
func (r *GatewayReconciler) noticeHostnames(s *gatewayScope, written *gatewayv1.Gateway) {
	if r.Routes == nil || r.programmed == nil {
		return
	}
	now := strings.Join(slices.Sorted(maps.Keys(listenerHostnames(written))), ",")
	key := hostnameSetKey(s.project, s.gw)
	r.programmed.mu.Lock()
	changed := r.programmed.last[key] != now
	r.programmed.last[key] = now
	r.programmed.mu.Unlock()
	if changed {
		r.Routes(context.Background(), s.project, s.gw)
	}
}

func hostnameSetKey(project string, gw *gatewayv1.Gateway) string {
	return project + "/" + gw.Namespace + "/" + gw.Name + "/" + string(gw.UID)
}

// forget drops what was remembered for gw, finalized.
func (h *hostnameSets) forget(project string, gw *gatewayv1.Gateway) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.last, hostnameSetKey(project, gw))
	delete(h.refused, hostnameSetKey(project, gw))
}

// hostnamesNotHeldError: none of a route's hostnames is on its Gateways' hub copies.
type hostnamesNotHeldError struct {
	hostnames []gatewayv1.Hostname
	// pending: no parent has a hub copy yet, so nothing is decided.
	pending bool
}

func (e *hostnamesNotHeldError) Error() string {
	var hs []string
	for _, h := range e.hostnames {
		hs = append(hs, string(h))
	}
	if e.pending {
		return fmt.Sprintf("waiting for the route's Gateways to be programmed with its hostnames (%s)", strings.Join(hs, ", "))
	}
	return fmt.Sprintf("none of the route's hostnames (%s) is programmed on its Gateways: each is held by another Gateway or not yet verified (see the Gateway's listener conditions)", strings.Join(hs, ", "))
}

// reason is the route's Accepted reason while it is not written.
func (e *hostnamesNotHeldError) reason() string {
	if e.pending {
		return v1alpha.ReasonPending
	}
	return ReasonHostnamesInUse
}

// keepHeldHostnames narrows down (the route's hub copy) to the hostnames its parents' hub
// Gateways listen on, read live; none kept is a *hostnamesNotHeldError, none set passes.
func (r *HTTPRouteReconciler) keepHeldHostnames(ctx context.Context, s *routeScope, hub client.Client, down *gatewayv1.HTTPRoute, hubNS string, hubNamespaces map[string]string) error {
	if len(s.route.Spec.Hostnames) == 0 {
		return nil
	}
	listened := map[gatewayv1.Hostname]bool{}
	found := 0
	for _, p := range s.parents {
		ns := hubNS
		if upNS := parentNamespace(p, s.route.Namespace); upNS != s.route.Namespace {
			ns = hubNamespaces[upNS]
		}
		gw := &gatewayv1.Gateway{}
		err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: string(p.Name)}, gw)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the hub copy of parent Gateway %s: %w", p.Name, err)
		}
		found++
		for _, l := range gw.Spec.Listeners {
			if l.Hostname != nil && (p.SectionName == nil || *p.SectionName == l.Name) {
				listened[*l.Hostname] = true
			}
		}
	}
	kept := slices.DeleteFunc(slices.Clone(s.route.Spec.Hostnames), func(h gatewayv1.Hostname) bool { return !listened[h] })
	if len(kept) == 0 {
		return &hostnamesNotHeldError{hostnames: s.route.Spec.Hostnames, pending: found == 0}
	}
	down.Spec.Hostnames = kept
	return nil
}

// reportHostnames sets, from the proxy's Gateway status, per hostname an Available
// condition (Claimed or InUse) and, under verification, a Verified one; Accepted=False,
// reason HostnamesInUse, naming the refused hostnames (never the holder), and
// HostnamesVerified naming the unverified ones and what to verify, each with an Event
// when it starts. It returns the hostnames programmed.
func (s *proxyScope) reportHostnames(verify bool) []gatewayv1.Hostname {
	refused := map[gatewayv1.Hostname]*metav1.Condition{}
	for _, ls := range s.gateway.Status.Listeners {
		c := meta.FindStatusCondition(ls.Conditions, string(gatewayv1.ListenerConditionProgrammed))
		if c == nil || (c.Reason != ReasonHostnamesInUse && c.Reason != ReasonUnverifiedHostname) {
			continue
		}
		for _, l := range s.gateway.Spec.Listeners {
			if l.Name == ls.Name && l.Hostname != nil {
				refused[*l.Hostname] = c
			}
		}
	}
	// Entries of other hostnames (the previous manager's canonical one) are kept.
	statuses := append([]v1alpha.HostnameStatus(nil), s.proxy.Status.HostnameStatuses...)
	var programmed []gatewayv1.Hostname
	byReason := map[string][]string{}
	for _, h := range s.proxy.Spec.Hostnames {
		i := slices.IndexFunc(statuses, func(st v1alpha.HostnameStatus) bool { return st.Hostname == string(h) })
		if i < 0 {
			statuses = append(statuses, v1alpha.HostnameStatus{Hostname: string(h)})
			i = len(statuses) - 1
		}
		st := &statuses[i]
		st.Conditions = append([]metav1.Condition(nil), st.Conditions...)
		available := verdict{true, "Claimed", "The hostname is programmed for this proxy"}
		verified := verdict{true, v1alpha.DomainReasonVerified, "A Verified Domain covers the hostname, or it was programmed before"}
		switch c := refused[h]; {
		case c == nil:
			programmed = append(programmed, h)
		case c.Reason == ReasonHostnamesInUse:
			available = verdict{false, "InUse", c.Message}
		default:
			available = verdict{false, ReasonUnverifiedHostname, c.Message}
			verified = verdict{false, ReasonUnverifiedHostname, c.Message}
		}
		if c := refused[h]; c != nil {
			byReason[c.Reason] = append(byReason[c.Reason], string(h))
		}
		meta.SetStatusCondition(&st.Conditions, available.condition(hostnameAvailable, s.proxy.Generation))
		if verify {
			meta.SetStatusCondition(&st.Conditions, verified.condition(hostnameVerified, s.proxy.Generation))
		}
	}
	s.proxy.Status.HostnameStatuses = statuses
	if verify && len(s.proxy.Spec.Hostnames) > 0 {
		v := verdict{true, conditionHostnamesVerified, "Every hostname is covered by a Verified Domain"}
		if hs := byReason[ReasonUnverifiedHostname]; len(hs) > 0 {
			v = verdict{false, reasonUnverifiedHostnamesPresent, fmt.Sprintf("Hostnames not verified, see each hostname's Verified condition and the Domains in namespace %s: %s", s.proxy.Namespace, strings.Join(hs, ", "))}
		}
		s.setCondition(conditionHostnamesVerified, v.ok, v.reason, v.message)
		if c := meta.FindStatusCondition(s.before.Status.Conditions, conditionHostnamesVerified); !v.ok && (c == nil || c.Status != metav1.ConditionFalse) {
			s.events.Eventf(s.proxy, nil, corev1.EventTypeWarning, reasonUnverifiedHostnamesPresent, "Programming", "%s", v.message)
		}
	}
	if hs := byReason[ReasonHostnamesInUse]; len(hs) > 0 {
		msg := fmt.Sprintf("Hostnames already programmed for another Gateway: %s", strings.Join(hs, ", "))
		s.setCondition(v1alpha.ConditionAccepted, false, ReasonHostnamesInUse, msg)
		if c := meta.FindStatusCondition(s.before.Status.Conditions, v1alpha.ConditionAccepted); c == nil || c.Reason != ReasonHostnamesInUse {
			s.events.Eventf(s.proxy, nil, corev1.EventTypeWarning, ReasonHostnamesInUse, "Programming", "%s", msg)
		}
	}
	return programmed
}

// The proxy's and each hostname's verification conditions (the previous manager's).
const (
	conditionHostnamesVerified       = "HostnamesVerified"
	reasonUnverifiedHostnamesPresent = "UnverifiedHostnamesPresent"
	hostnameVerified                 = "Verified"
)

// hostnameAvailable is the per-hostname condition type (the previous manager's).
const hostnameAvailable = "Available"

// releaseClaims deletes every claim the terminating Gateway of s holds.
func (r *GatewayReconciler) releaseClaims(ctx context.Context, s *gatewayScope) error {
	claims := hostnameClaims{hub: s.hub, ns: r.Config.HostnameClaimsNamespace}
	held, err := claims.held(ctx, claimantOf(s.project, s.gw))
	if err != nil {
		return err
	}
	r.programmed.forget(s.project, s.gw)
	return claims.releaseUnless(ctx, held, nil)
}
