package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
)

// Only the Lease verbs this file uses, in the operator's namespace: no list or watch
// (leases are read past the cache, one GET per check), no delete (a store's Lease is
// owned by the store, so the garbage collector removes it with the store).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=bucketkeeper-system

// Leases elects, per store, the one shard that health-checks it when several
// operator deployments split the buckets (--watch-label-selector, --shard-count).
// ObjectStores are cluster-scoped, so every shard reconciles every store; without an
// election each store would be checked, and its status written, once per shard. The
// holder of a store's Lease checks it and writes its verdict; the others read that
// verdict from the store's status (as buckets always do) and come back when the Lease
// would expire, so a shard that dies is replaced within the Lease's duration.
//
// Expiry is renewTime + leaseDurationSeconds read on the local clock, as the Lease API
// defines it; the grace in the duration (defaults.StoreLeaseGrace) absorbs clocks a few
// seconds apart. A takeover too early by more than the grace costs one extra check and
// the old holder steps back at its next renewal (its update conflicts or finds
// another holder), never two shards checking on.
type Leases struct {
	// Client creates and updates Leases; Reader reads them from the API server (not a
	// cache: a cache would need list and watch on every Lease of the namespace).
	Client client.Client
	Reader client.Reader
	// Namespace holds the Leases: the operator's own (that of its leader election).
	Namespace string
	// Identity names this shard in holderIdentity. Each shard needs its own and the
	// same one across restarts of its pods (its leader-election ID), so a restarted
	// shard keeps its stores instead of waiting for its own Leases to expire.
	Identity string
	Clock    clock.PassiveClock
}

// LeaseName is the name of store's health-check Lease. Store names may be 253
// characters long, as long as a Lease name may be: a name that does not fit after the
// prefix is shortened and made unique by a hash of the whole.
func LeaseName(store string) string {
	const maxName = 253
	name := bkv1.StoreLeasePrefix + store
	if len(name) <= maxName {
		return name
	}
	sum := sha256.Sum256([]byte(store))
	suffix := "-" + hex.EncodeToString(sum[:])[:16]
	// The cut must not end a DNS label with a dot or a dash before the suffix.
	return strings.TrimRight(name[:maxName-len(suffix)], ".-") + suffix
}

// LeaseDuration is how long a store's Lease lasts: one health-check interval
// plus the grace, as the holder renews it at every check.
func LeaseDuration(interval time.Duration) time.Duration {
	return interval + defaults.StoreLeaseGrace
}

// Hold takes or renews the Lease of store for duration. It says whether this shard
// holds it now and, if not, how long until the Lease may be taken over (when to look
// again). Two shards racing for a free Lease cannot both win: creation and every
// update are conditional (AlreadyExists, resourceVersion), and the loser looks again
// later.
func (l *Leases) Hold(ctx context.Context, store *bkv1.ObjectStore, duration time.Duration) (held bool, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, defaults.LeaseCallTimeout)
	defer cancel()
	now := metav1.NewMicroTime(l.Clock.Now())
	seconds := int32(math.Ceil(duration.Seconds()))
	key := types.NamespacedName{Namespace: l.Namespace, Name: LeaseName(store.Name)}
	lease := &coordinationv1.Lease{}
	if err := l.Reader.Get(ctx, key, lease); apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
				// The store owns its Lease (a cluster-scoped owner of a namespaced
				// object): deleting the store deletes the Lease, without the
				// operator needing the right to delete Leases.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: bkv1.GroupVersion.String(), Kind: "ObjectStore", Name: store.Name, UID: store.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.Identity), LeaseDurationSeconds: ptr.To(seconds), AcquireTime: &now, RenewTime: &now},
		}
		switch err := l.Client.Create(ctx, lease); {
		case apierrors.IsAlreadyExists(err):
			return false, duration, nil // another shard created it just now
		case err != nil:
			return false, 0, err
		}
		return true, 0, nil
	} else if err != nil {
		return false, 0, err
	}

	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder != l.Identity && holder != "" && lease.Spec.RenewTime != nil {
		expires := lease.Spec.RenewTime.Add(time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second)
		if wait := expires.Sub(now.Time); wait > 0 {
			return false, wait, nil
		}
	}
	if holder != l.Identity {
		lease.Spec.AcquireTime = &now
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
	}
	lease.Spec.HolderIdentity = ptr.To(l.Identity)
	lease.Spec.RenewTime = &now
	lease.Spec.LeaseDurationSeconds = ptr.To(seconds)
	switch err := l.Client.Update(ctx, lease); {
	case apierrors.IsConflict(err):
		// Another shard renewed or took the Lease since it was read: look again
		// soon, and see who holds it.
		return false, defaults.MinStoreCheckGap, nil
	case err != nil:
		return false, 0, err
	}
	return true, 0, nil
}

// HeldHere says whether this shard holds the store's health-check Lease (and so does
// the store's other per-store work, such as the access collector's). It reads the
// Lease and never takes or renews it: that is the health check's.
func (l *Leases) HeldHere(ctx context.Context, store string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, defaults.LeaseCallTimeout)
	defer cancel()
	lease := &coordinationv1.Lease{}
	err := l.Reader.Get(ctx, types.NamespacedName{Namespace: l.Namespace, Name: LeaseName(store)}, lease)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "") == l.Identity, nil
}
