package bucketaccess

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// pendingKey is a key created and not yet proven to work. Its secret lives only
// here until it is written to the Secret: after a crash the key is unknown (in
// neither Secret nor memory) and is deleted, and a new one is made.
type pendingKey struct {
	key      iam.AccessKey
	request  string // the rotate-requested-at value it answers ("" for none)
	attempts int
}

// verifyBackoff is the wait after the n-th failed try of a new key: stores accept a
// new key after a moment (SeaweedFS ~200ms, AWS seconds).
func verifyBackoff(attempts int) time.Duration {
	d := 250 * time.Millisecond << min(attempts, 7)
	return min(d, 30*time.Second)
}

// reconcileKeys brings the user's keys to: the Secret's key, plus during a grace
// period the key it replaced, plus at most one new key being verified — never more
// than two on the store. Every decision is derived from ListAccessKeys and the
// Secret, so a crash between any two calls converges.
func (r *Reconciler) reconcileKeys(ctx context.Context, s *accessScope) error {
	ba := s.ba
	keys, err := s.driver.ListKeys(ctx, s.user)
	if err != nil {
		if iam.KindOf(err) == iam.KindNoSuchEntity {
			// The user went since this process wrote its policy (the access
			// collector, another shard, a person): create it again next time.
			r.forgetApplied(ba.UID)
		}
		return err
	}
	secret, err := r.currentAccessSecret(ctx, ba)
	if err != nil {
		return err
	}
	current := ""
	if secret != nil {
		if id := string(secret.Data[bkv1.AccessSecretKeyAccessKeyID]); hasKey(keys, id) && len(secret.Data[bkv1.AccessSecretKeySecretKey]) > 0 {
			current = id
		}
	}
	pending := r.pendingOf(ba.UID)
	if pending != nil && !hasKey(keys, pending.key.ID) {
		pending = nil // deleted outside the operator
		r.setPending(ba.UID, nil)
	}
	now := r.Clock.Now()
	rot := &ba.Status.Rotation

	// Sort the store's keys: the current one, the previous one (kept during
	// grace), the pending one; anything else is unknown. The previous key is the
	// one status records, or else any key not provably newer than the current:
	// status read from the cache can lag the pass that wrote the Secret, and
	// stores date keys to the second or not at all, so "older" cannot be required
	// without deleting a key pods still use before its grace. Only a key made
	// after the current one (a crash between CreateKey and the Secret write) is
	// known to be unused.
	previous := ""
	var currentKey iam.AccessKey
	for _, k := range keys {
		if k.ID == current {
			currentKey = k
		}
	}
	for _, k := range keys {
		switch {
		case k.ID == current || (pending != nil && k.ID == pending.key.ID):
		case current != "" && previous == "" && (k.ID == rot.PreviousKeyID || !newerThan(k, currentKey)):
			previous = k.ID
		default:
			log.FromContext(ctx).Info("deleting an access key the operator does not use", "user", s.user, "key", k.ID)
			if err := s.driver.DeleteKey(ctx, s.user, k.ID); err != nil {
				return err
			}
		}
	}

	if previous != "" {
		if rot.PreviousKeyID != previous || rot.PreviousKeyExpiresAt == nil {
			// Recorded after a crash lost the status: a full grace from now.
			rot.PreviousKeyID, rot.PreviousKeyExpiresAt = previous, r.graceEnd(now)
		}
		if now.Before(rot.PreviousKeyExpiresAt.Time) {
			rot.State = bkv1.RotationGrace
			s.requeueIn(rot.PreviousKeyExpiresAt.Sub(now))
			return r.writeAccessSecretFrom(ctx, s, secret)
		}
		if err := s.driver.DeleteKey(ctx, s.user, previous); err != nil {
			return err
		}
		r.Recorder.Eventf(ba, nil, corev1.EventTypeNormal, bkv1.ReasonKeyIssued, "Rotate", "deleted the previous key %s after its grace period", previous)
	}
	rot.PreviousKeyID, rot.PreviousKeyExpiresAt = "", nil

	if current != "" && pending == nil {
		rot.State = bkv1.RotationIdle
		ba.Status.AccessKeyID = current
		if ba.Status.KeyCreatedAt == nil {
			ba.Status.KeyCreatedAt = &metav1.Time{Time: now}
		}
		if request, due := r.rotationDue(ba, now); due {
			return r.startKey(ctx, s, request, secret)
		} else if every := ba.Spec.Rotation; every != nil {
			s.requeueIn(ba.Status.KeyCreatedAt.Add(every.Every.Duration).Sub(now))
		}
		return r.writeAccessSecretFrom(ctx, s, secret)
	}
	if pending == nil {
		return r.startKey(ctx, s, ba.Annotations[bkv1.AnnotationRotateRequestedAt], secret)
	}
	return r.promote(ctx, s, pending, current, secret)
}

// startKey creates a new key (the first, or a rotation's second) and tries it.
func (r *Reconciler) startKey(ctx context.Context, s *accessScope, request string, secret *corev1.Secret) error {
	key, err := s.driver.CreateKey(ctx, s.user)
	if err != nil {
		if iam.KindOf(err) == iam.KindNoSuchEntity {
			r.forgetApplied(s.ba.UID) // as in reconcileKeys: the user went
		}
		return err
	}
	p := &pendingKey{key: key, request: request}
	r.setPending(s.ba.UID, p)
	current := ""
	if secret != nil {
		current = string(secret.Data[bkv1.AccessSecretKeyAccessKeyID])
	}
	return r.promote(ctx, s, p, current, secret)
}

// promote tries the pending key against every bucket and, once it works, writes it
// to the Secret; the key it replaces enters its grace period.
func (r *Reconciler) promote(ctx context.Context, s *accessScope, p *pendingKey, current string, secret *corev1.Secret) error {
	ba, rot := s.ba, &s.ba.Status.Rotation
	if err := r.tryKey(ctx, s, p.key); err != nil {
		p.attempts++
		rot.State = bkv1.RotationVerifying
		s.requeueIn(verifyBackoff(p.attempts))
		if current != "" {
			// The Secret still holds a working key: the access stays Ready.
			return r.writeAccessSecretFrom(ctx, s, secret)
		}
		return &reconcile.StepError{Reason: bkv1.ReasonProgressing, Message: fmt.Sprintf("waiting for the store to accept the new key %s (try %d): %v", p.key.ID, p.attempts, err), Waiting: true}
	}
	if err := r.writeAccessSecret(ctx, s, p.key.ID, p.key.Secret); err != nil {
		return err
	}
	now := r.Clock.Now()
	r.setPending(ba.UID, nil)
	ba.Status.AccessKeyID, ba.Status.KeyCreatedAt = p.key.ID, &metav1.Time{Time: now}
	rot.LastRotationTime = &metav1.Time{Time: now}
	if p.request != "" {
		rot.LastHandledRequest = p.request
	}
	rot.State = bkv1.RotationIdle
	if current != "" && current != p.key.ID {
		rot.State = bkv1.RotationGrace
		rot.PreviousKeyID, rot.PreviousKeyExpiresAt = current, r.graceEnd(now)
		s.requeueIn(r.grace())
	}
	r.Recorder.Eventf(ba, nil, corev1.EventTypeNormal, bkv1.ReasonKeyIssued, "IssueKey", "Secret %s holds the new key %s", ba.Spec.SecretName, p.key.ID)
	return nil
}

// tryKey proves a key works: a HeadBucket on every bucket with it.
func (r *Reconciler) tryKey(ctx context.Context, s *accessScope, key iam.AccessKey) error {
	c, err := r.Stores.Factory(ctx, s3.Config{
		Endpoint:              s.store.Spec.Endpoint,
		Region:                stores.Region(s.store),
		ForcePathStyle:        s.store.Spec.ForcePathStyle,
		AccessKeyID:           key.ID,
		SecretAccessKey:       key.Secret,
		CABundle:              []byte(s.store.Spec.CABundle),
		InsecureSkipTLSVerify: s.store.Spec.InsecureSkipTLSVerify,
		RequestTimeout:        5 * time.Second,
	})
	if err != nil {
		return err
	}
	for _, g := range s.grants {
		if _, err := c.HeadBucket(ctx, g.Bucket); err != nil {
			return err
		}
	}
	return nil
}

// rotationDue says whether a new key is asked for: a new value of the rotate
// annotation, or a key older than rotation.every.
func (r *Reconciler) rotationDue(ba *bkv1.BucketAccess, now time.Time) (request string, due bool) {
	request = ba.Annotations[bkv1.AnnotationRotateRequestedAt]
	if request != "" && request != ba.Status.Rotation.LastHandledRequest {
		return request, true
	}
	if ba.Spec.Rotation != nil && ba.Status.KeyCreatedAt != nil && !now.Before(ba.Status.KeyCreatedAt.Add(ba.Spec.Rotation.Every.Duration)) {
		return "", true
	}
	return "", false
}

// graceEnd is when a key replaced at now may go, rounded up to the second: status
// keeps times to the second, and rounding down would cut the grace short.
func (r *Reconciler) graceEnd(now time.Time) *metav1.Time {
	end := now.Add(r.grace())
	if whole := end.Truncate(time.Second); whole.Before(end) {
		end = whole.Add(time.Second)
	}
	return &metav1.Time{Time: end}
}

func (r *Reconciler) grace() time.Duration {
	if r.KeyGrace > 0 {
		return r.KeyGrace
	}
	return defaults.AccessKeyGrace
}

func (r *Reconciler) pendingOf(uid types.UID) *pendingKey {
	p, _ := r.pending.Get(uid)
	return p
}

func (r *Reconciler) setPending(uid types.UID, p *pendingKey) {
	if p == nil {
		r.pending.Delete(uid)
		return
	}
	r.pending.Set(uid, p)
}

func (s *accessScope) requeueIn(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	if s.requeue == 0 || d < s.requeue {
		s.requeue = d
	}
}

func hasKey(keys []iam.AccessKey, id string) bool {
	for _, k := range keys {
		if id != "" && k.ID == id {
			return true
		}
	}
	return false
}

// newerThan: k was created after current, by the store's own clock. Unknown
// dates prove nothing.
func newerThan(k, current iam.AccessKey) bool {
	return !k.Created.IsZero() && !current.Created.IsZero() && k.Created.After(current.Created)
}
