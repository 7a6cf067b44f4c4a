package storagebucket

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// +kubebuilder:rbac:groups=bucketkeeper.io,resources=bucketaccesses,verbs=get;list;watch

// The bucket policy's freeze (move_freeze.go) holds every key on the stores that apply
// bucket policies to keys. MinIO applies them to anonymous requests only
// (minio/minio#10578), so there the freeze also narrows the keys the operator issued:
// the policy of every BucketAccess identity on the store that names the claim denies
// the freeze's writes on the bucket (iam.WithBucketFrozen). A keyFreezer is what a
// store adds to the bucket policy's freeze, chosen by its access provider
// (freezerFor). Its state is on the store (the identities' policies, compared as
// policies) and in the claim's status (StorageBucket.WritesFrozen, which the
// BucketAccess controller renders into the same policies), never in memory, so a
// restarted operator freezes and thaws where the last one left off.

// keyFreezer stops, or lets again, the writes of the keys a store's bucket policies do
// not bind.
type keyFreezer interface {
	// freeze narrows the keys of the claim sb so that none writes bucket; thaw undoes
	// it. Both are idempotent.
	freeze(ctx context.Context, sb *bkv1.StorageBucket, bucket string) error
	thaw(ctx context.Context, sb *bkv1.StorageBucket, bucket string) error
	// unstopped says, in words, which keys' writes the store's freeze does not stop.
	unstopped() string
}

// bucketPolicyFreezer is the freezer of the stores whose bucket policies bind keys:
// the bucket policy's freeze is all there is to do.
type bucketPolicyFreezer struct{}

func (bucketPolicyFreezer) freeze(context.Context, *bkv1.StorageBucket, string) error { return nil }
func (bucketPolicyFreezer) thaw(context.Context, *bkv1.StorageBucket, string) error   { return nil }
func (bucketPolicyFreezer) unstopped() string {
	return "the bucket policy's Deny binds every key on stores that apply bucket policies to keys; on a MinIO ObjectStore without accessProvider iam.api MinIO it stops no key's writes"
}

// minioFreezer freezes the BucketAccess keys the operator issued on a MinIO store.
type minioFreezer struct {
	r      *Reconciler
	store  string
	editor iam.PolicyEditor
}

func (f minioFreezer) unstopped() string {
	return fmt.Sprintf("MinIO (ObjectStore %s) applies bucket policies to anonymous requests only, so its freeze stops only the BucketAccess keys bucketkeeper issued; keys not issued by bucketkeeper (made by hand on MinIO, its root user, application credentials) are not frozen", f.store)
}

func (f minioFreezer) freeze(ctx context.Context, sb *bkv1.StorageBucket, bucket string) error {
	return f.set(ctx, sb, bucket, true)
}

func (f minioFreezer) thaw(ctx context.Context, sb *bkv1.StorageBucket, bucket string) error {
	return f.set(ctx, sb, bucket, false)
}

// set writes the freeze of bucket into, or out of, the policy of every identity on the
// store of a BucketAccess naming the claim, where the policy the store holds differs.
// Every call is under the admin API's per-call deadline (the driver's Timeout).
func (f minioFreezer) set(ctx context.Context, sb *bkv1.StorageBucket, bucket string, frozen bool) error {
	users, err := f.r.issuedUsers(ctx, sb, f.store)
	if err != nil {
		return err
	}
	for _, user := range users {
		current, err := f.editor.UserPolicy(ctx, user)
		if err != nil {
			return freezeError(err, fmt.Sprintf("reading the policy of %s on ObjectStore %s", user, f.store))
		}
		if current == "" {
			continue // no user, or no policy: its keys reach nothing
		}
		want, err := iam.WithBucketFrozen(current, bucket, frozen)
		if err != nil {
			return err
		}
		if same, err := s3.EquivalentPolicies(current, want); err != nil || same {
			return err
		}
		if err := f.editor.PutUserPolicyDocument(ctx, user, want); err != nil {
			what := "denying the writes of"
			if !frozen {
				what = "allowing the writes of"
			}
			return freezeError(err, fmt.Sprintf("%s %s on ObjectStore %s to %s", what, bucket, f.store, user))
		}
	}
	return nil
}

// freezeError is a failure of the admin API while freezing or thawing keys: one a
// retry cannot mend (the operator's identity lacks an admin action, a policy refused)
// stops the move with its reason, to be looked at again after the sync interval,
// rather than being retried every poll.
func freezeError(err error, doing string) error {
	switch iam.KindOf(err) {
	case iam.KindAccessDenied, iam.KindInvalidCredentials:
		return reconcile.Terminalf(bkv1.ReasonAccessDenied, "%s: %v (the operator's identity on MinIO needs admin:GetPolicy and admin:CreatePolicy, docs/access.md)", doing, err)
	case iam.KindInvalid, iam.KindNotImplemented:
		return reconcile.Terminalf(bkv1.ReasonConfigFailed, "%s: %v", doing, err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// issuedUsers are the identities the BucketAccesses naming sb may hold on store: the
// one each status records, and the name the operator derives, in case its status was
// not written. Keyless accesses hold roles, which MinIO has none of.
func (r *Reconciler) issuedUsers(ctx context.Context, sb *bkv1.StorageBucket, store string) ([]string, error) {
	list := &bkv1.BucketAccessList{}
	if err := r.List(ctx, list, client.InNamespace(sb.Namespace)); err != nil {
		return nil, err
	}
	var users []string
	for _, ba := range list.Items {
		if ba.Spec.ServiceAccountName != "" || !slices.ContainsFunc(ba.Spec.Buckets, func(g bkv1.BucketGrant) bool { return g.Name == sb.Name }) {
			continue
		}
		if ba.Status.ObjectStore != "" && ba.Status.ObjectStore != store {
			continue
		}
		for _, u := range []string{ba.Status.IdentityName, iam.UserName(r.ClusterID, string(ba.UID))} {
			if u != "" && !slices.Contains(users, u) {
				users = append(users, u)
			}
		}
	}
	return users, nil
}

// freezerFor chooses the key freezer of the store a move leaves.
func (r *Reconciler) freezerFor(ctx context.Context, store *bkv1.ObjectStore) (keyFreezer, error) {
	if stores.AccessProviderOf(store) != bkv1.AccessProviderIAM || iam.BucketPoliciesBindKeys(stores.IAMAPIOf(store)) || r.Access == nil {
		return bucketPolicyFreezer{}, nil
	}
	driver, err := r.Access.DriverFor(ctx, store)
	if err != nil {
		return nil, err
	}
	editor, ok := iam.PolicyEditorOf(driver)
	if !ok {
		return bucketPolicyFreezer{}, nil
	}
	return minioFreezer{r: r, store: store.Name, editor: editor}, nil
}
