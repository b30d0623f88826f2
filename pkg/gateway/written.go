package gateway

import (
	"slices"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultWrittenOwners bounds WrittenObjects: a few megabytes; an owner pushed out
// costs its finalizer one GET per object.
const DefaultWrittenOwners = 50_000

// WrittenObjects remembers, per upstream owner, the UID of each downstream object this
// replica wrote on its anchor, so a finalizer deletes it with one DELETE conditional on
// that UID (docs/design.md, Gateway path). A nil *WrittenObjects remembers nothing.
type WrittenObjects struct {
	mu     sync.Mutex
	owners *lru.Cache[types.UID, map[writtenKey]types.UID]
}

type writtenKey struct{ kind, namespace, name string }

// NewWrittenObjects remembers the writes of at most owners upstream owners (the least
// recently written are forgotten first); owners ≤ 0 means DefaultWrittenOwners.
func NewWrittenObjects(owners int) *WrittenObjects {
	if owners <= 0 {
		owners = DefaultWrittenOwners
	}
	c, err := lru.New[types.UID, map[writtenKey]types.UID](owners)
	if err != nil { // only for a size ≤ 0
		panic(err)
	}
	return &WrittenObjects{owners: c}
}

// remember records that obj, of kind, now hangs on owner's anchor on the hub.
func (m *WrittenObjects) remember(owner types.UID, kind string, obj client.Object) {
	if m == nil || obj.GetUID() == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	objs, ok := m.owners.Get(owner)
	if !ok {
		objs = map[writtenKey]types.UID{}
		m.owners.Add(owner, objs)
	}
	objs[writtenKey{kind, obj.GetNamespace(), obj.GetName()}] = obj.GetUID()
}

// uidOf returns the UID owner's write of kind at key left on the hub, if remembered.
func (m *WrittenObjects) uidOf(owner types.UID, kind string, key client.ObjectKey) (types.UID, bool) {
	if m == nil {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	objs, ok := m.owners.Peek(owner)
	if !ok {
		return "", false
	}
	uid, ok := objs[writtenKey{kind, key.Namespace, key.Name}]
	return uid, ok
}

// namesOf returns the names of the objects of kind in namespace that owner wrote, sorted.
func (m *WrittenObjects) namesOf(owner types.UID, kind, namespace string) []string {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	objs, _ := m.owners.Peek(owner)
	var out []string
	for k := range objs {
		if k.kind == kind && k.namespace == namespace {
			out = append(out, k.name)
		}
	}
	slices.Sort(out)
	return out
}

// forget drops what was remembered of owner's object of kind at key: it is gone, or
// no longer the one written.
func (m *WrittenObjects) forget(owner types.UID, kind string, key client.ObjectKey) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if objs, ok := m.owners.Peek(owner); ok {
		delete(objs, writtenKey{kind, key.Namespace, key.Name})
	}
}

// forgetOwner drops everything remembered of owner: its finalizer is done.
func (m *WrittenObjects) forgetOwner(owner types.UID) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owners.Remove(owner)
}
