// Deletion: a proxy deleted, and everything of it leaving the hub and the project.

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

// deleteProxy deletes one proxy and waits until nothing of it is left on the hub.
func (d *demo) deleteProxy(ctx context.Context) error {
	var px *proxy
	for i, p := range d.proxies {
		if p.project == d.projects[0] && p.name == "checkout" {
			px = p
			d.proxies = append(d.proxies[:i:i], d.proxies[i+1:]...)
			break
		}
	}
	if px == nil {
		return errors.New("no proxy checkout in the first project")
	}
	c := px.project.plane.Client
	obj := &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: px.project.namespace, Name: px.name}}
	began := time.Now()
	if err := c.Delete(ctx, obj); err != nil {
		return fmt.Errorf("deleting %s: %w", px, err)
	}
	d.say("deleted HTTPProxy %s/%s in project %s; its finalizers delete the anchors, the hub's garbage collector the rest", px.project.namespace, px.name, px.project.name)
	var anchors []hubObject
	for _, a := range px.anchors {
		anchors = append(anchors, a.anchor)
	}
	err := poll(ctx, gcWithin, "the proxy's anchors to go", func(ctx context.Context) (bool, error) {
		n, err := countPresent(ctx, d.hub.Client, anchors)
		return n == 0, err
	})
	if err != nil {
		return err
	}
	for _, a := range px.anchors {
		d.say("%s (anchor of %s) gone after %.1fs%s", shortName(a.anchor.name), a.owner(), time.Since(began).Seconds(), d.collectedBy(a.anchor.name))
	}
	err = poll(ctx, gcWithin, "everything of the proxy to leave the hub and the project", func(ctx context.Context) (bool, error) {
		n, err := countPresent(ctx, d.hub.Client, px.objects())
		if err != nil || n > 0 {
			return false, err
		}
		err = c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return err
	}
	d.res.deletedWithProxy = len(anchors)
	d.say("nothing of %s left on the hub (%d objects) nor in the project %.1fs after the delete", px.name, len(px.objects()), time.Since(began).Seconds())
	views, err := anchorsIn(ctx, d.hub.Client, px.project.hubNamespace())
	if err != nil {
		return err
	}
	var left []string
	for _, v := range views {
		left = append(left, v.labels[anchor.LabelKind]+" "+v.labels[anchor.LabelName])
	}
	d.say("%s now holds the anchors of: %s", shortName(px.project.hubNamespace()), strings.Join(left, ", "))
	return nil
}
