package anchor

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// These tests give DeleteIndexed an index the test controls (so it can show the hub as
// a stale cache would) and count, with a transport wrapped around the package's API
// server, every request it sends.

// shownIndex is a NameIndex that shows what the test put in it, or fails with err.
type shownIndex struct {
	items []metav1.PartialObjectMetadata
	err   error
}

func (s shownIndex) Named(_ context.Context, name string) ([]metav1.PartialObjectMetadata, error) {
	if s.err != nil {
		return nil, s.err
	}
	var out []metav1.PartialObjectMetadata
	for _, item := range s.items {
		if item.Name == name {
			out = append(out, item)
		}
	}
	return out, nil
}

// indexShowing returns an index showing an item named after owner in each namespace.
func indexShowing(owner Owner, namespaces ...string) shownIndex {
	var s shownIndex
	for _, ns := range namespaces {
		s.items = append(s.items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name(owner.UID), Labels: owner.Labels()}})
	}
	return s
}

// requestLog records the method and path of every request sent through it.
type requestLog struct {
	mu       sync.Mutex
	requests []string
}

func (l *requestLog) RoundTripper(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.requests = append(l.requests, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		return next.RoundTrip(r)
	})
}

// apiRequests returns the requests other than discovery (which a new client sends once
// to build its REST mapper).
func (l *requestLog) apiRequests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []string{}
	for _, r := range l.requests {
		if _, path, _ := strings.Cut(r, " "); path != "/api" && path != "/apis" {
			out = append(out, r)
		}
	}
	return out
}

// onConfigMaps returns the requests on ConfigMaps, as "METHOD namespace/name" or
// "METHOD list" for a request without a name.
func (l *requestLog) onConfigMaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []string{}
	for _, r := range l.requests {
		method, path, _ := strings.Cut(r, " ")
		segs := strings.Split(strings.Trim(path, "/"), "/")
		for i, s := range segs {
			if s != "configmaps" {
				continue
			}
			switch {
			case i+1 < len(segs) && i >= 2 && segs[i-2] == "namespaces":
				out = append(out, method+" "+segs[i-1]+"/"+segs[i+1])
			default:
				out = append(out, method+" list")
			}
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// loggedHub returns a client of the package's API server whose requests are logged.
func loggedHub(t *testing.T) (client.WithWatch, *requestLog) {
	t.Helper()
	needHub(t)
	log := &requestLog{}
	cfg := rest.CopyConfig(hubConfig)
	cfg.Wrap(log.RoundTripper)
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c, log
}

// createAnchor creates owner's anchor in ns, with labels when given (owner's otherwise).
func createAnchor(t *testing.T, ns string, owner Owner, labels map[string]string) *corev1.ConfigMap {
	t.Helper()
	if labels == nil {
		labels = owner.Labels()
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name(owner.UID), Labels: labels}}
	if err := needHub(t).Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// TestDeleteIndexedCostsAGetAndADelete: deleting an anchor in its known mapped
// namespace sends exactly a GET and a DELETE of that anchor and nothing else to the
// hub; deleting it again sends one GET, which finds it gone.
func TestDeleteIndexedCostsAGetAndADelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, log := loggedHub(t)
	ns := newMappedNamespace(t, nil)
	owner := newOwner()
	createAnchor(t, ns, owner, nil)
	key := ns + "/" + Name(owner.UID)

	g.Expect(DeleteIndexed(ctx, c, indexShowing(owner, ns), ns, owner)).To(Succeed())
	g.Expect(log.onConfigMaps()).To(Equal([]string{"GET " + key, "DELETE " + key}))
	_, err := getConfigMap(t, ns, Name(owner.UID))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "anchor still there: %v", err)

	g.Expect(DeleteIndexed(ctx, c, indexShowing(owner), ns, owner)).To(Succeed(), "deleting again is not an error")
	g.Expect(log.onConfigMaps()).To(Equal([]string{"GET " + key, "DELETE " + key, "GET " + key}))
	g.Expect(log.apiRequests()).To(HaveLen(3), "no other request of any kind")
}

// TestDeleteIndexedRefusesWhatTheIndexShowsElsewhere: an anchor of the owner's name
// that the index shows in another mapped namespace makes the deletion ambiguous:
// nothing is read or deleted, and the error names both namespaces. A look-alike the
// index shows outside ns-<uuid> namespaces makes nothing ambiguous.
func TestDeleteIndexedRefusesWhatTheIndexShowsElsewhere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, log := loggedHub(t)
	ns, other := newMappedNamespace(t, nil), newMappedNamespace(t, nil)
	owner := newOwner()
	createAnchor(t, ns, owner, nil)
	createAnchor(t, other, owner, nil)

	err := DeleteIndexed(ctx, c, indexShowing(owner, ns, other), ns, owner)
	g.Expect(errors.Is(err, ErrAmbiguous)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(And(ContainSubstring(ns), ContainSubstring(other)))
	g.Expect(log.apiRequests()).To(BeEmpty(), "an ambiguous deletion reads nothing")
	for _, n := range []string{ns, other} {
		_, err := getConfigMap(t, n, Name(owner.UID))
		g.Expect(err).NotTo(HaveOccurred(), "anchor in %s must survive", n)
	}

	err = DeleteIndexed(ctx, c, indexShowing(owner, ns, "default"), ns, owner)
	g.Expect(err).NotTo(HaveOccurred(), "a ConfigMap outside mapped namespaces is not an anchor")
	_, err = getConfigMap(t, ns, Name(owner.UID))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "anchor still there: %v", err)
}

// TestDeleteIndexedOnAStaleIndex: a stale index can only make a deletion more cautious
// or change nothing. It still shows a duplicate that is gone: refused. It has not seen
// the anchor in the mapped namespace yet: the live GET finds and deletes it. It has not
// seen a duplicate created elsewhere: only the anchor proven in the mapped namespace is
// deleted, and the duplicate survives.
func TestDeleteIndexedOnAStaleIndex(t *testing.T) {
	ctx := context.Background()
	c, _ := loggedHub(t)

	t.Run("shows a duplicate that is gone", func(t *testing.T) {
		g := NewWithT(t)
		ns := newMappedNamespace(t, nil)
		owner := newOwner()
		createAnchor(t, ns, owner, nil)
		err := DeleteIndexed(ctx, c, indexShowing(owner, ns, MappedNamespace(uuid.NewUUID())), ns, owner)
		g.Expect(errors.Is(err, ErrAmbiguous)).To(BeTrue(), "got %v", err)
		_, err = getConfigMap(t, ns, Name(owner.UID))
		g.Expect(err).NotTo(HaveOccurred(), "the anchor must survive")
	})
	t.Run("has not seen the anchor", func(t *testing.T) {
		g := NewWithT(t)
		ns := newMappedNamespace(t, nil)
		owner := newOwner()
		createAnchor(t, ns, owner, nil)
		g.Expect(DeleteIndexed(ctx, c, indexShowing(owner), ns, owner)).To(Succeed())
		_, err := getConfigMap(t, ns, Name(owner.UID))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "anchor still there: %v", err)
	})
	t.Run("has not seen a duplicate", func(t *testing.T) {
		g := NewWithT(t)
		ns, other := newMappedNamespace(t, nil), newMappedNamespace(t, nil)
		owner := newOwner()
		createAnchor(t, ns, owner, nil)
		createAnchor(t, other, owner, nil)
		g.Expect(DeleteIndexed(ctx, c, indexShowing(owner, ns), ns, owner)).To(Succeed())
		_, err := getConfigMap(t, ns, Name(owner.UID))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "anchor still there: %v", err)
		_, err = getConfigMap(t, other, Name(owner.UID))
		g.Expect(err).NotTo(HaveOccurred(), "the duplicate outside the mapped namespace is never touched")
	})
}

// TestDeleteIndexedWithoutTheMappedNamespace: when the mapped namespace is not known,
// the index says where the anchor is: one cached anchor is read live and deleted, two
// are ambiguous, none means nothing is sent to the hub at all.
func TestDeleteIndexedWithoutTheMappedNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, log := loggedHub(t)
	ns, other := newMappedNamespace(t, nil), newMappedNamespace(t, nil)
	owner := newOwner()
	createAnchor(t, ns, owner, nil)

	g.Expect(DeleteIndexed(ctx, c, indexShowing(owner), "", owner)).To(Succeed())
	g.Expect(log.apiRequests()).To(BeEmpty(), "nothing cached: nothing sent")
	_, err := getConfigMap(t, ns, Name(owner.UID))
	g.Expect(err).NotTo(HaveOccurred(), "an anchor the index does not show is kept, never deleted blind")

	err = DeleteIndexed(ctx, c, indexShowing(owner, ns, other), "", owner)
	g.Expect(errors.Is(err, ErrAmbiguous)).To(BeTrue(), "got %v", err)
	g.Expect(log.apiRequests()).To(BeEmpty())

	g.Expect(DeleteIndexed(ctx, c, indexShowing(owner, ns), "", owner)).To(Succeed())
	key := ns + "/" + Name(owner.UID)
	g.Expect(log.onConfigMaps()).To(Equal([]string{"GET " + key, "DELETE " + key}))
	_, err = getConfigMap(t, ns, Name(owner.UID))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "anchor still there: %v", err)
}

// TestDeleteIndexedKeepsWhatItCannotProve: what the live read shows decides, whatever
// the index shows: a ConfigMap of the anchor's name with another owner's labels,
// labels that do not decode, or an ownerReference is kept; so is everything when the
// index cannot answer (nothing is sent), and bad input is refused.
func TestDeleteIndexedKeepsWhatItCannotProve(t *testing.T) {
	ctx := context.Background()
	c, log := loggedHub(t)
	cases := map[string]struct {
		labels  func(Owner) map[string]string
		owned   bool
		index   func(owner Owner, ns string) NameIndex
		wantErr error
	}{
		"another owner": {labels: func(o Owner) map[string]string { o.Project = "other"; return o.Labels() }, wantErr: ErrForeign},
		"malformed": {labels: func(o Owner) map[string]string {
			l := o.Labels()
			delete(l, LabelKind)
			return l
		}, wantErr: ErrMalformed},
		"owned":               {owned: true, wantErr: ErrForeign},
		"index cannot answer": {index: func(Owner, string) NameIndex { return shownIndex{err: errIndexDown} }, wantErr: errIndexDown},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newMappedNamespace(t, nil)
			owner := newOwner()
			var labels map[string]string
			if tc.labels != nil {
				labels = tc.labels(owner)
			}
			cm := createAnchor(t, ns, owner, labels)
			if tc.owned {
				parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "parent"}}
				g.Expect(needHub(t).Create(ctx, parent)).To(Succeed())
				cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: parent.Name, UID: parent.UID}}
				g.Expect(needHub(t).Update(ctx, cm)).To(Succeed())
			}
			var index NameIndex = indexShowing(owner, ns)
			if tc.index != nil {
				index = tc.index(owner, ns)
			}
			before := len(log.onConfigMaps())
			err := DeleteIndexed(ctx, c, index, ns, owner)
			g.Expect(errors.Is(err, tc.wantErr)).To(BeTrue(), "got %v", err)
			g.Expect(log.onConfigMaps()[before:]).NotTo(ContainElement(HavePrefix("DELETE")))
			if tc.index != nil {
				g.Expect(log.onConfigMaps()[before:]).To(BeEmpty(), "an index that cannot answer: nothing is read")
			}
			_, err = getConfigMap(t, ns, cm.Name)
			g.Expect(err).NotTo(HaveOccurred(), "the ConfigMap must survive")
		})
	}

	g := NewWithT(t)
	owner := newOwner()
	g.Expect(DeleteIndexed(ctx, c, indexShowing(owner), "default", owner)).To(MatchError(ErrMalformed), "a namespace that is not ns-<uuid>")
	g.Expect(DeleteIndexed(ctx, c, nil, MappedNamespace(uuid.NewUUID()), owner)).NotTo(Succeed(), "no index")
	bad := owner
	bad.UID = "not-a-uid"
	g.Expect(DeleteIndexed(ctx, c, indexShowing(owner), MappedNamespace(uuid.NewUUID()), bad)).To(MatchError(ErrMalformed))
}

var errIndexDown = errors.New("anchor cache not synced")

// TestDeleteIndexedIsConditionalOnTheRead: an anchor replaced between the GET and the
// DELETE is not deleted: the DELETE carries the UID and resourceVersion read.
func TestDeleteIndexedIsConditionalOnTheRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := needHub(t)
	ns := newMappedNamespace(t, nil)
	owner := newOwner()
	original := createAnchor(t, ns, owner, nil)

	var replacement types.UID
	racing := replacingBeforeDelete(c, original, owner, &replacement)

	err := DeleteIndexed(ctx, racing, indexShowing(owner, ns), ns, owner)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "a precondition failure is reported as such: %v", err)
	stored, err := getConfigMap(t, ns, original.Name)
	g.Expect(err).NotTo(HaveOccurred(), "the replacement must survive")
	g.Expect(stored.UID).To(Equal(replacement))
}

// replacingBeforeDelete wraps c so that its Delete first deletes original and creates a
// new anchor of the same name and owner (its UID stored in *replacement), then sends
// the delete it was asked for: a replacement racing between a check and its delete.
func replacingBeforeDelete(c client.WithWatch, original *corev1.ConfigMap, owner Owner, replacement *types.UID) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Delete: func(ctx context.Context, inner client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := inner.Delete(ctx, original.DeepCopy()); err != nil {
				return err
			}
			fresh := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: original.Namespace, Name: original.Name, Labels: owner.Labels()}}
			if err := inner.Create(ctx, fresh); err != nil {
				return err
			}
			*replacement = fresh.UID
			return inner.Delete(ctx, obj, opts...)
		},
	})
}
