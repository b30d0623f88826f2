package resync

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"anchorage/pkg/anchor"
)

// TestReadLiveTellsAbsenceFromUnservedKinds checks, on a real API server, the two
// NotFounds of FACTS.md: an object missing in a served kind proves absence; a kind the
// server does not serve, whether the mapper knows it or not, proves nothing.
func TestReadLiveTellsAbsenceFromUnservedKinds(t *testing.T) {
	g := NewWithT(t)
	c, ctx := needHub(t), context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live-" + rand.String(6)}}
	g.Expect(c.Create(ctx, ns)).To(Succeed())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "here", Namespace: ns.Name}}
	g.Expect(c.Create(ctx, cm)).To(Succeed())

	var calls atomic.Int64
	plane := Plane{Live: countingReader{c, &calls}, Mapper: c.RESTMapper()}
	owner := anchor.Owner{Project: "p", Kind: "ConfigMap", Namespace: ns.Name, Name: "here"}
	obs, err := plane.readLive(ctx, owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs).To(Equal(Observation{State: Present, UID: cm.UID}))
	g.Expect(calls.Swap(0)).To(Equal(int64(1)))

	owner.Name = "missing"
	obs, err = plane.readLive(ctx, owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs.State).To(Equal(Absent), "a NotFound naming the object")

	widget := anchor.Owner{Project: "p", Group: "example.com", Kind: "Widget", Namespace: ns.Name, Name: "w"}
	calls.Store(0)
	obs, _ = plane.readLive(ctx, widget)
	g.Expect(obs.State).To(Equal(NotServed), "no mapping for a kind never served")
	g.Expect(calls.Load()).To(BeZero())

	// A mapper that still maps a kind the server no longer serves (a deleted CRD): the
	// server answers 404 without naming anything.
	stale := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "example.com", Version: "v1"}})
	stale.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	unservedClient, err := client.New(hubConfig, client.Options{Mapper: stale})
	g.Expect(err).NotTo(HaveOccurred())
	obs, err = Plane{Live: countingReader{unservedClient, &calls}, Mapper: stale}.readLive(ctx, widget)
	g.Expect(obs.State).To(Equal(NotServed), "a 404 that does not name the object: %v", err)
	g.Expect(calls.Load()).To(Equal(int64(1)))

	st, err := plane.readNamespace(ctx, ns.Name, anchor.MappedNamespace(ns.UID))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(NamespaceMatches))
	st, _ = plane.readNamespace(ctx, ns.Name, anchor.MappedNamespace(uuid.NewUUID()))
	g.Expect(st).To(Equal(NamespaceRecreated))
	st, _ = plane.readNamespace(ctx, "gone-"+rand.String(6), anchor.MappedNamespace(uuid.NewUUID()))
	g.Expect(st).To(Equal(NamespaceGone))
}

// TestStrictCacheOption: the strict reader fails for a kind the cache does not watch
// and never starts an informer; the cluster's own readers still start one on first use.
func TestStrictCacheOption(t *testing.T) {
	g := NewWithT(t)
	needHub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := cluster.New(hubConfig, StrictCacheOption())
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = cl.Start(ctx) }()
	g.Expect(cl.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	strict, ok := StrictReader(cl.GetCache())
	g.Expect(ok).To(BeTrue())
	key := client.ObjectKey{Namespace: "default", Name: "kubernetes"}
	err = strict.Get(ctx, key, &corev1.Service{})
	var notCached *cache.ErrResourceNotCached
	g.Expect(errors.As(err, &notCached)).To(BeTrue(), "got %v", err)
	plane := Plane{Cache: strict, Scheme: scheme.Scheme}
	g.Expect(plane.cacheReader().read(ctx, anchor.Owner{Kind: "Service", Namespace: "default", Name: "kubernetes"}).State).To(Equal(NotWatched))

	// The reconcilers' path: a read through the cluster's client starts the informer.
	svc := &corev1.Service{}
	g.Expect(cl.GetClient().Get(ctx, key, svc)).To(Succeed())
	list := &corev1.ServiceList{}
	g.Expect(cl.GetClient().List(ctx, list)).To(Succeed())
	g.Expect(cl.GetClient().List(ctx, &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}})).To(Succeed())

	// Now the strict reader answers from the same informer.
	obs := plane.cacheReader().read(ctx, anchor.Owner{Kind: "Service", Namespace: "default", Name: "kubernetes"})
	g.Expect(obs).To(Equal(Observation{State: Present, UID: svc.UID}))
	g.Expect(plane.cacheReader().read(ctx, anchor.Owner{Kind: "Service", Namespace: "default", Name: "missing"}).State).To(Equal(Absent))
}

// TestAnchorCacheHoldsLabelledConfigMapsByProject: only ConfigMaps with the
// cluster-name label are cached, indexed by the project it decodes to (legacy
// spellings included).
func TestAnchorCacheHoldsLabelledConfigMapsByProject(t *testing.T) {
	g := NewWithT(t)
	c := needHub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := anchor.MappedNamespace(uuid.NewUUID())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	project := "cache-" + rand.String(6)
	current := anchor.Owner{Project: project, Group: "gateway.networking.k8s.io", Kind: "Gateway", Namespace: "default", Name: "web", UID: uuid.NewUUID()}
	legacy := current
	legacy.UID = uuid.NewUUID()
	legacyLabels := legacy.Labels()
	legacyLabels[anchor.LabelClusterName] = "cluster-_" + project
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(current.UID), Namespace: ns, Labels: current.Labels()}},
		{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(legacy.UID), Namespace: ns, Labels: legacyLabels}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled", Namespace: ns}},
	} {
		g.Expect(c.Create(ctx, cm)).To(Succeed())
	}
	ac, err := NewAnchorCache(ctx, hubConfig, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = ac.Start(ctx) }()
	g.Expect(ac.WaitForCacheSync(ctx)).To(BeTrue())
	g.Eventually(func(g Gomega) {
		items, err := ac.ProjectAnchors(ctx, project)
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, i := range items {
			names = append(names, i.Name)
			g.Expect(i.ManagedFields).To(BeEmpty(), "managed fields are stripped")
		}
		g.Expect(names).To(ConsistOf(anchor.Name(current.UID), anchor.Name(legacy.UID)))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	named, err := ac.Named(ctx, anchor.Name(legacy.UID))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(named).To(HaveLen(1))
	all, err := ac.All(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, i := range all {
		g.Expect(i.Labels).To(HaveKey(anchor.LabelClusterName))
	}
}
