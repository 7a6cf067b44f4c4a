package soak_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// The tenants' moves beyond their objects' specs: finalizers stripped, objects written
// into their buckets, and the platform team's namespaces relabelled and deleted.

// stripFinalizer is the tenant removing the operator's finalizer from one of its
// objects (a StorageBucket, an explicit BucketAccess or one a StorageBucket made) and
// deleting it, in either order: the operator never sees the deletion through. A
// claim's bucket is then left as it was (rig.retained), its key revoked by the access
// collector.
func (r *soakRun) stripFinalizer() (string, error) {
	tn, err := r.existingTenant()
	if err != nil {
		return "", err
	}
	var obj client.Object
	switch claims, accesses := r.provisionedFirst(tn), sortedNames(tn.accesses); {
	case len(claims) > 0 && (len(accesses) == 0 || r.chance(0.6)):
		name := pickFrom(r, claims)
		if r.chance(0.3) { // the access the claim made (spec.access), if it has one
			obj = &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: tn.name, Name: name}}
		} else {
			obj = &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: tn.name, Name: name}}
			delete(tn.claims, name)
		}
	case len(accesses) > 0:
		name := pickFrom(r, accesses)
		obj = &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: tn.name, Name: name}}
		delete(tn.accesses, name)
	default:
		return "", errSkipped
	}
	deleteFirst := r.chance(0.3)
	kind := fmt.Sprintf("%T", obj)[len("*v1alpha1."):]
	what := fmt.Sprintf("%s %s/%s (deleted %s)", kind, tn.name, obj.GetName(), map[bool]string{true: "first", false: "after"}[deleteFirst])
	if deleteFirst {
		if err := k8s.Delete(r.ctx, obj); err != nil {
			return what, err
		}
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(r.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if sb, claim := obj.(*bkv1.StorageBucket); claim {
			r.rig.retained.Store(obj.GetUID(), struct{}{})
			r.rig.noteStripped(sb)
		}
		if !controllerutil.RemoveFinalizer(obj, bkv1.Finalizer) {
			return nil
		}
		return k8s.Update(r.ctx, obj)
	})
	if err != nil || deleteFirst {
		return what, err
	}
	return what, k8s.Delete(r.ctx, obj)
}

// provisionedFirst is the tenant's claims that have a bucket (status says so), or all
// of them when none has yet: a finalizer stripped from a claim that holds a bucket is
// the attack that matters.
func (r *soakRun) provisionedFirst(tn *tenant) []string {
	var with []string
	for _, name := range sortedNames(tn.claims) {
		sb := &bkv1.StorageBucket{}
		if err := k8s.Get(r.ctx, client.ObjectKey{Namespace: tn.name, Name: name}, sb); err == nil && sb.Status.BucketName != "" {
			with = append(with, name)
		}
	}
	if len(with) == 0 {
		return sortedNames(tn.claims)
	}
	return with
}

// putObject writes an object into a claim's bucket, as its application would (with the
// store admin's key: the soak is not about the application's key), so deletions meet
// buckets that are not empty.
func (r *soakRun) putObject() (string, error) {
	tn, name, err := r.someClaim()
	if err != nil {
		return "", err
	}
	key := fmt.Sprintf("soak/object-%d", r.seq)
	sb := &bkv1.StorageBucket{}
	if err := k8s.Get(r.ctx, client.ObjectKey{Namespace: tn.name, Name: name}, sb); err != nil {
		return "", err
	}
	if sb.Status.BucketName == "" {
		return "", errSkipped
	}
	sr := r.rig.store(sb.HomeStore())
	ctx, cancel := context.WithTimeout(r.ctx, 15*time.Second)
	defer cancel()
	return fmt.Sprintf("%s/%s: %s in %s", tn.name, name, key, sb.Status.BucketName), sr.admin.PutObject(ctx, sb.Status.BucketName, key, []byte("soak"))
}

// relabelNamespace moves a tenant in or out of the Versity store's tier: its buckets
// there are refused (a guardrail) and their keys must go, or come back.
func (r *soakRun) relabelNamespace() (string, error) {
	tn, err := r.existingTenant()
	if err != nil {
		return "", err
	}
	tn.gold = !tn.gold
	ns := &corev1.Namespace{}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(r.ctx, client.ObjectKey{Name: tn.name}, ns); err != nil {
			return err
		}
		ns.Labels = tenantLabels(tn.gold)
		return k8s.Update(r.ctx, ns)
	})
	return fmt.Sprintf("%s gold=%v", tn.name, tn.gold), err
}

// deleteNamespace deletes a tenant's namespace; the soak's stand-in for the namespace
// controller (kube_test.go) deletes what is in it and finalizes it.
func (r *soakRun) deleteNamespace() (string, error) {
	tn, err := r.existingTenant()
	if err != nil {
		return "", err
	}
	tn.exists, tn.claims, tn.accesses = false, nil, nil
	return tn.name, k8s.Delete(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn.name}})
}
