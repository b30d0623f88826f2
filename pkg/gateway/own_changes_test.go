package gateway

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// ownedProxy is an HTTPProxy as a reconcile leaves it: finalized, Accepted, at
// resourceVersion "1" and generation 1.
func ownedProxy() *v1alpha.HTTPProxy {
	p := &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "1", Generation: 1,
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x"},
		Finalizers: []string{v1alpha.HTTPProxyFinalizer},
	}}
	p.Spec.Hostnames = []gatewayv1.Hostname{"a.example.com"}
	p.Status.Conditions = []metav1.Condition{{Type: v1alpha.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha.ReasonAccepted}}
	return p
}

// proxyChanged returns ownedProxy at resourceVersion "2" after change.
func proxyChanged(change func(*v1alpha.HTTPProxy)) *v1alpha.HTTPProxy {
	p := ownedProxy()
	p.ResourceVersion = "2"
	change(p)
	return p
}

// unfinalized is ownedProxy at resourceVersion rv carrying finalizers instead of ours.
func unfinalized(rv string, finalizers ...string) *v1alpha.HTTPProxy {
	p := ownedProxy()
	p.ResourceVersion = rv
	p.Finalizers = finalizers
	return p
}

func TestOwnChangeMatters(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		// Dropped: nothing the reconciler acts on changed.
		{"status condition only", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{Type: v1alpha.ConditionProgrammed, Status: metav1.ConditionTrue})
		}), false},
		{"status addresses only", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: "10.0.0.1"}}
		}), false},
		{"resourceVersion only", ownedProxy(), proxyChanged(func(*v1alpha.HTTPProxy) {}), false},
		{"managedFields only", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "someone", Operation: metav1.ManagedFieldsOperationUpdate}}
		}), false},
		{"gateway status only", gatewayAt("g", "1", false, GatewayFinalizer), func() client.Object {
			gw := gatewayAt("g", "2", false, GatewayFinalizer)
			gw.Status.Conditions = []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue}}
			return gw
		}(), false},

		// Kept: something the reconciler reads changed.
		{"generation (spec)", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.Generation = 2
			p.Spec.Hostnames = []gatewayv1.Hostname{"b.example.com"}
		}), true},
		{"label changed", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) { p.Labels["app"] = "api" }), true},
		{"labels removed", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) { p.Labels = nil }), true},
		{"annotation added", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) { p.Annotations["other"] = "y" }), true},
		{"our finalizer added alone", unfinalized("1", "other/f"), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.Finalizers = []string{"other/f", v1alpha.HTTPProxyFinalizer}
		}), false},
		{"our finalizer added to none", unfinalized("1"), proxyChanged(func(*v1alpha.HTTPProxy) {}), false},
		{"our finalizer added with a spec change", unfinalized("1"), proxyChanged(func(p *v1alpha.HTTPProxy) { p.Generation = 2 }), true},
		{"someone else's finalizer added", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.Finalizers = append(p.Finalizers, "other/f")
		}), true},
		{"ours added and another removed", unfinalized("1", "other/f"), proxyChanged(func(*v1alpha.HTTPProxy) {}), true},
		{"ours added in front (not by us)", unfinalized("1", "other/f"), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.Finalizers = []string{v1alpha.HTTPProxyFinalizer, "other/f"}
		}), true},
		{"finalizer removed", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) { p.Finalizers = nil }), true},
		{"deletion requested", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(10, 0)}
		}), true},
		{"deletion requested with status", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(10, 0)}
			p.Status.Conditions = nil
		}), true},
		{"owner reference added", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "o1", Controller: ptr.To(true)}}
		}), true},
		{"replaced (new UID)", ownedProxy(), proxyChanged(func(p *v1alpha.HTTPProxy) { p.UID = types.UID("u2") }), true},
		{"resync (same resourceVersion)", ownedProxy(), ownedProxy(), true},
		{"no old object", nil, ownedProxy(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownChangeMatters(tc.old, tc.new, v1alpha.HTTPProxyFinalizer); got != tc.want {
				t.Errorf("ownChangeMatters = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOwnChangesPassesCreateDeleteGeneric: only updates are filtered.
func TestOwnChangesPassesCreateDeleteGeneric(t *testing.T) {
	p := ownChanges(v1alpha.HTTPProxyFinalizer)
	obj := ownedProxy()
	if !p.Create(event.CreateEvent{Object: obj}) {
		t.Error("create dropped")
	}
	if !p.Delete(event.DeleteEvent{Object: obj}) {
		t.Error("delete dropped")
	}
	if !p.Generic(event.GenericEvent{Object: obj}) {
		t.Error("generic dropped")
	}
	statusOnly := proxyChanged(func(p *v1alpha.HTTPProxy) { p.Status.Conditions = nil })
	if p.Update(event.UpdateEvent{ObjectOld: obj, ObjectNew: statusOnly}) {
		t.Error("status-only update passed")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: obj, ObjectNew: proxyChanged(func(p *v1alpha.HTTPProxy) { p.Generation = 2 })}) {
		t.Error("spec update dropped")
	}
}

// TestParentChangesForRoutes: a Gateway's status changes bring none of its routes back;
// its class, any finalizer, its deletion and its creation do.
func TestParentChangesForRoutes(t *testing.T) {
	gw := func(rv string, change func(*gatewayv1.Gateway)) *gatewayv1.Gateway {
		g := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", UID: "u1", ResourceVersion: rv, Generation: 1,
			Finalizers: []string{GatewayFinalizer}}}
		g.Spec.GatewayClassName = "ours"
		change(g)
		return g
	}
	same := func(*gatewayv1.Gateway) {}
	pred := ownChanges("") // the Gateway watch of the HTTPRoute controller
	for _, tc := range []struct {
		name string
		new  *gatewayv1.Gateway
		want bool
	}{
		{"programmed condition", gw("2", func(g *gatewayv1.Gateway) {
			g.Status.Conditions = []metav1.Condition{{Type: string(gatewayv1.GatewayConditionProgrammed), Status: metav1.ConditionTrue}}
		}), false},
		{"addresses", gw("2", func(g *gatewayv1.Gateway) {
			g.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: "10.0.0.1"}}
		}), false},
		{"class changed", gw("2", func(g *gatewayv1.Gateway) { g.Spec.GatewayClassName = "other"; g.Generation = 2 }), true},
		{"another finalizer added", gw("2", func(g *gatewayv1.Gateway) { g.Finalizers = append(g.Finalizers, "x") }), true},
		{"deleted", gw("2", func(g *gatewayv1.Gateway) { g.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }), true},
		{"resync", gw("1", same), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pred.Update(event.UpdateEvent{ObjectOld: gw("1", same), ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update = %t, want %t", got, tc.want)
			}
		})
	}
	if !pred.Create(event.CreateEvent{Object: gw("1", same)}) || !pred.Delete(event.DeleteEvent{Object: gw("1", same)}) {
		t.Error("creates and deletes of a Gateway must bring its routes")
	}
}
