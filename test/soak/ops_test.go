package soak_test

import (
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// The tenants' and the platform team's operations. Each picks its target from the
// soak's own record of what it made (so a seed replays the same choices), acts with the
// admin's client as the tenant could (every verb on its StorageBuckets, BucketAccesses
// and Secrets, finalizers included), and says what it did. An answer such as "already
// exists" (a name whose earlier object is still being deleted) or "not found" (deleted
// meanwhile) is a race the soak means to have: it is counted, not failed.

// op is one kind of operation and how often it is drawn.
type op struct {
	name   string
	weight int
	run    func(*soakRun) (string, error)
}

// errSkipped: the operation found nothing to act on this time.
var errSkipped = errors.New("nothing to act on")

var operations = []op{
	{"create-bucket", 18, (*soakRun).createBucket},
	{"edit-bucket", 12, (*soakRun).editBucket},
	{"delete-bucket", 9, (*soakRun).deleteBucket},
	{"flash-bucket", 4, (*soakRun).flashBucket},
	{"create-access", 10, (*soakRun).createAccess},
	{"edit-access", 7, (*soakRun).editAccess},
	{"move-bucket", 4, (*soakRun).moveBucket},
	{"repoint-access", 3, (*soakRun).repointAccess},
	{"rotate-key", 3, (*soakRun).rotateKey},
	{"delete-access", 6, (*soakRun).deleteAccess},
	{"strip-finalizer", 5, (*soakRun).stripFinalizer},
	{"put-object", 5, (*soakRun).putObject},
	{"relabel-namespace", 3, (*soakRun).relabelNamespace},
	{"delete-namespace", 2, (*soakRun).deleteNamespace},
	{"kill-operator", 4, (*soakRun).killOperator},
	{"store-outage", 4, (*soakRun).storeOutage},
}

// Name pools: few enough that names are reused, so a claim meets the bucket its
// predecessor of the same name released, and an access the user of an earlier one.
var (
	tenantNames = []string{"soak-t0", "soak-t1", "soak-t2", "soak-t3"}
	claimNames  = []string{"b0", "b1", "b2", "b3", "b4", "b5"}
	accessNames = []string{"a0", "a1", "a2", "a3"}
)

// tenant is the soak's record of one tenant namespace.
type tenant struct {
	name     string
	exists   bool // created, and not deleted by the soak since
	gold     bool
	claims   map[string]bool
	accesses map[string]bool
}

func (r *soakRun) pick(n int) int { return r.rng.IntN(n) }

func (r *soakRun) chance(p float64) bool { return r.rng.Float64() < p }

func pickFrom[T any](r *soakRun, xs []T) T { return xs[r.pick(len(xs))] }

// sortedNames lists the keys of a record's set, in order, so choices replay.
func sortedNames(m map[string]bool) []string {
	var out []string
	for k, in := range m {
		if in {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// freeName picks a tenant (made if need be) and a name of pool its record does not
// hold.
func (r *soakRun) freeName(pool []string, record func(*tenant) map[string]bool) (*tenant, string, error) {
	tn, err := r.someTenant()
	if err != nil {
		return nil, "", err
	}
	name, ok := r.freeIn(pool, record(tn))
	if !ok {
		return nil, "", errSkipped
	}
	return tn, name, nil
}

// freeIn picks a name of pool that used does not hold.
func (r *soakRun) freeIn(pool []string, used map[string]bool) (string, bool) {
	var free []string
	for _, n := range pool {
		if !used[n] {
			free = append(free, n)
		}
	}
	if len(free) == 0 {
		return "", false
	}
	return pickFrom(r, free), true
}

// someTenant picks a tenant; one that does not exist (never made, or deleted) is made,
// unless its previous namespace is still being deleted.
func (r *soakRun) someTenant() (*tenant, error) {
	tn := pickFrom(r, r.tenants)
	if tn.exists {
		return tn, nil
	}
	tn.gold = r.chance(0.6)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn.name, Labels: tenantLabels(tn.gold)}}
	if err := k8s.Create(r.ctx, ns); err != nil {
		return nil, err // AlreadyExists: the last one is still terminating
	}
	tn.exists, tn.claims, tn.accesses = true, map[string]bool{}, map[string]bool{}
	r.logf("namespace %s created (gold %v)", tn.name, tn.gold)
	return tn, nil
}

func tenantLabels(gold bool) map[string]string {
	l := map[string]string{labelTenant: "true"}
	if gold {
		l[labelTier] = tierGold
	}
	return l
}

// existingTenant picks a tenant the soak made and has not deleted, or errSkipped.
func (r *soakRun) existingTenant() (*tenant, error) {
	var live []*tenant
	for _, tn := range r.tenants {
		if tn.exists {
			live = append(live, tn)
		}
	}
	if len(live) == 0 {
		return nil, errSkipped
	}
	return pickFrom(r, live), nil
}

func (r *soakRun) createBucket() (string, error) {
	tn, name, err := r.freeName(claimNames, func(tn *tenant) map[string]bool { return tn.claims })
	if err != nil {
		return "", err
	}
	store := pickFrom(r, r.rig.stores).name
	if r.chance(0.05) {
		store = missingStore // never Ready: an access naming it must not keep what it granted
	}
	sb := &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.name, Name: name},
		Spec: bkv1.StorageBucketSpec{
			ObjectStoreRef: bkv1.ObjectStoreReference{Name: store},
			DeletionPolicy: pickFrom(r, []bkv1.DeletionPolicy{bkv1.DeletionPolicyRetain, bkv1.DeletionPolicyDelete, bkv1.DeletionPolicyPurge}),
			Access:         pickFrom(r, []string{"", "", string(bkv1.AccessReadWrite), string(bkv1.AccessReadOnly)}),
			Probe:          bkv1.ProbeSpec{Interval: &metav1.Duration{Duration: time.Minute}},
		},
	}
	if r.chance(0.3) {
		sb.Spec.Versioning = bkv1.VersioningEnabled
	}
	if r.chance(0.5) {
		sb.Spec.Tags = map[string]string{"soak-round": fmt.Sprint(r.round)}
	}
	if err := k8s.Create(r.ctx, sb); err != nil {
		return "", err
	}
	r.rig.notePolicy(sb)
	tn.claims[sb.Name] = true
	return fmt.Sprintf("%s/%s on %s, %s, access %q", tn.name, sb.Name, store, sb.Spec.DeletionPolicy, sb.Spec.Access), nil
}

// missingStore is an ObjectStore that never exists.
const missingStore = "soak-nowhere"

// flashBucket creates a claim and deletes it a few milliseconds later, so that its
// deletion lands anywhere in its first pass: before the finalizer, between the create
// intent and CreateBucket, between CreateBucket and the tags, or after.
func (r *soakRun) flashBucket() (string, error) {
	tn, name, err := r.freeName(claimNames, func(tn *tenant) map[string]bool { return tn.claims })
	if err != nil {
		return "", err
	}
	store := pickFrom(r, r.rig.stores).name
	if troubled := r.rig.troubled(); len(troubled) > 0 && r.chance(0.7) {
		store = pickFrom(r, troubled) // where a first pass is most fragile
	}
	policy := pickFrom(r, []bkv1.DeletionPolicy{bkv1.DeletionPolicyDelete, bkv1.DeletionPolicyDelete, bkv1.DeletionPolicyRetain})
	after := time.Duration(r.pick(50)) * time.Millisecond
	sb := &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.name, Name: name},
		Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: store}, DeletionPolicy: policy},
	}
	what := fmt.Sprintf("%s/%s on %s, %s, deleted after %s", tn.name, sb.Name, store, policy, after)
	if err := k8s.Create(r.ctx, sb); err != nil {
		return what, err
	}
	r.rig.notePolicy(sb)
	time.Sleep(after)
	return what, k8s.Delete(r.ctx, sb)
}

// someClaim picks a claim the soak made and has not deleted.
func (r *soakRun) someClaim() (*tenant, string, error) {
	return r.someOf(func(tn *tenant) map[string]bool { return tn.claims })
}

// someOf picks a name from one of a live tenant's records.
func (r *soakRun) someOf(record func(*tenant) map[string]bool) (*tenant, string, error) {
	tn, err := r.existingTenant()
	if err != nil {
		return nil, "", err
	}
	names := sortedNames(record(tn))
	if len(names) == 0 {
		return nil, "", errSkipped
	}
	return tn, pickFrom(r, names), nil
}

func (r *soakRun) editBucket() (string, error) {
	tn, name, err := r.someClaim()
	if err != nil {
		return "", err
	}
	// The edit is drawn before the object is read, so that the draws replay.
	edit := r.pick(5)
	value := r.pick(1000)
	what := ""
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sb := &bkv1.StorageBucket{}
		if err := k8s.Get(r.ctx, client.ObjectKey{Namespace: tn.name, Name: name}, sb); err != nil {
			return err
		}
		switch edit {
		case 0:
			sb.Spec.Tags = map[string]string{"soak-edit": fmt.Sprint(value)}
			what = "tags"
		case 1:
			sb.Spec.Versioning = []bkv1.VersioningState{bkv1.VersioningEnabled, bkv1.VersioningSuspended}[value%2]
			what = "versioning " + string(sb.Spec.Versioning)
		case 2:
			sb.Spec.DeletionPolicy = []bkv1.DeletionPolicy{bkv1.DeletionPolicyRetain, bkv1.DeletionPolicyDelete, bkv1.DeletionPolicyPurge}[value%3]
			what = "deletionPolicy " + string(sb.Spec.DeletionPolicy)
		case 3:
			sb.Spec.Access = []string{"", string(bkv1.AccessReadWrite), string(bkv1.AccessReadOnly)}[value%3]
			what = fmt.Sprintf("access %q", sb.Spec.Access)
		default:
			if sb.Spec.ConnectionSecret.Name == "" {
				sb.Spec.ConnectionSecret.Name = name + "-conn"
			} else {
				sb.Spec.ConnectionSecret.Name = ""
			}
			what = fmt.Sprintf("connectionSecret %q", sb.Spec.ConnectionSecret.Name)
		}
		if err := k8s.Update(r.ctx, sb); err != nil {
			return err
		}
		r.rig.notePolicy(sb)
		return nil
	})
	return fmt.Sprintf("%s/%s: %s", tn.name, name, what), err
}

// moveBucket asks for a claim's bucket to move to a store drawn from all of them, as
// its tenant may: a store it already lives on cancels a move under way, and a third
// one moves it on from wherever the last move left it. Now and then every version
// moves, or the source is to be deleted a second after the cutover.
func (r *soakRun) moveBucket() (string, error) {
	tn, name, err := r.someClaim()
	if err != nil {
		return "", err
	}
	target := pickFrom(r, r.rig.stores).name
	move := &bkv1.MoveSpec{Versions: pickFrom(r, []bkv1.MoveVersions{bkv1.MoveVersionsCurrent, bkv1.MoveVersionsCurrent, bkv1.MoveVersionsAll})}
	if r.chance(0.3) {
		move.DeleteSourceAfter = &metav1.Duration{Duration: time.Second}
	}
	what := fmt.Sprintf("%s/%s to %s (versions %s, deleteSourceAfter %v)", tn.name, name, target, move.Versions, move.DeleteSourceAfter != nil)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sb := &bkv1.StorageBucket{}
		if err := k8s.Get(r.ctx, client.ObjectKey{Namespace: tn.name, Name: name}, sb); err != nil {
			return err
		}
		if sb.Spec.ObjectStoreRef.Name == target {
			return errSkipped
		}
		sb.Spec.Move, sb.Spec.ObjectStoreRef.Name = move, target
		return k8s.Update(r.ctx, sb)
	})
	return what, err
}

func (r *soakRun) deleteBucket() (string, error) {
	return r.deleteSome(func(tn *tenant) map[string]bool { return tn.claims }, func() client.Object { return &bkv1.StorageBucket{} })
}

// deleteSome deletes an object the soak made, named in one of a tenant's records.
func (r *soakRun) deleteSome(record func(*tenant) map[string]bool, empty func() client.Object) (string, error) {
	tn, name, err := r.someOf(record)
	if err != nil {
		return "", err
	}
	delete(record(tn), name)
	obj := empty()
	obj.SetNamespace(tn.name)
	obj.SetName(name)
	return tn.name + "/" + name, k8s.Delete(r.ctx, obj)
}

func (r *soakRun) createAccess() (string, error) {
	tn, name, err := r.freeName(accessNames, func(tn *tenant) map[string]bool { return tn.accesses })
	if err != nil {
		return "", err
	}
	ba := &bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.name, Name: name},
		Spec:       bkv1.BucketAccessSpec{Buckets: r.someGrants(tn)},
	}
	ba.Spec.SecretName = ba.Name + "-key"
	if err := k8s.Create(r.ctx, ba); err != nil {
		return "", err
	}
	tn.accesses[ba.Name] = true
	return fmt.Sprintf("%s/%s over %v", tn.name, ba.Name, ba.Spec.Buckets), nil
}

// someGrants draws one or two grants over the tenant's claims; now and then a name
// with no claim, which the access waits for.
func (r *soakRun) someGrants(tn *tenant) []bkv1.BucketGrant {
	names := sortedNames(tn.claims)
	n := 1
	if r.chance(0.25) {
		n = 2
	}
	var grants []bkv1.BucketGrant
	for range n {
		name := pickFrom(r, claimNames)
		if len(names) > 0 && r.chance(0.9) {
			name = pickFrom(r, names)
		}
		if slices.ContainsFunc(grants, func(g bkv1.BucketGrant) bool { return g.Name == name }) {
			continue
		}
		grants = append(grants, bkv1.BucketGrant{Name: name, Mode: pickFrom(r, []bkv1.AccessMode{bkv1.AccessReadWrite, bkv1.AccessReadOnly})})
	}
	return grants
}

// someAccess picks an access the soak made and has not deleted.
func (r *soakRun) someAccess() (*tenant, string, error) {
	return r.someOf(func(tn *tenant) map[string]bool { return tn.accesses })
}

func (r *soakRun) editAccess() (string, error) {
	tn, name, err := r.someAccess()
	if err != nil {
		return "", err
	}
	edit := r.pick(3)
	grants := r.someGrants(tn)
	what := ""
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ba := &bkv1.BucketAccess{}
		if err := k8s.Get(r.ctx, client.ObjectKey{Namespace: tn.name, Name: name}, ba); err != nil {
			return err
		}
		switch edit {
		case 0:
			ba.Spec.Buckets = grants
			what = fmt.Sprintf("buckets %v", grants)
		case 1:
			for i := range ba.Spec.Buckets {
				if ba.Spec.Buckets[i].Mode == bkv1.AccessReadOnly {
					ba.Spec.Buckets[i].Mode = bkv1.AccessReadWrite
				} else {
					ba.Spec.Buckets[i].Mode = bkv1.AccessReadOnly
				}
			}
			what = fmt.Sprintf("modes flipped: %v", ba.Spec.Buckets)
		default:
			if ba.Spec.SecretName == name+"-key" {
				ba.Spec.SecretName = name + "-key2"
			} else {
				ba.Spec.SecretName = name + "-key"
			}
			what = "secretName " + ba.Spec.SecretName
		}
		return k8s.Update(r.ctx, ba)
	})
	return fmt.Sprintf("%s/%s: %s", tn.name, name, what), err
}

// repointAccess points an access at a claim that will never be Ready (made for it, on
// an ObjectStore that does not exist), as a tenant may: nothing can be issued for it,
// and what the access granted before must not stay reachable.
func (r *soakRun) repointAccess() (string, error) {
	tn, name, err := r.someAccess()
	if err != nil {
		return "", err
	}
	claim, ok := r.freeIn(claimNames, tn.claims)
	if !ok {
		return "", errSkipped
	}
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: tn.name, Name: claim},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: missingStore}, DeletionPolicy: bkv1.DeletionPolicyDelete}}
	what := fmt.Sprintf("%s/%s to %s on %s", tn.name, name, claim, missingStore)
	if err := k8s.Create(r.ctx, sb); err != nil {
		return what, err
	}
	tn.claims[claim] = true
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ba := &bkv1.BucketAccess{}
		if err := k8s.Get(r.ctx, client.ObjectKey{Namespace: tn.name, Name: name}, ba); err != nil {
			return err
		}
		ba.Spec.Buckets = []bkv1.BucketGrant{{Name: claim, Mode: bkv1.AccessReadWrite}}
		return k8s.Update(r.ctx, ba)
	})
	return what, err
}

func (r *soakRun) rotateKey() (string, error) {
	tn, name, err := r.someAccess()
	if err != nil {
		return "", err
	}
	ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: tn.name, Name: name}}
	stamp := fmt.Sprintf("soak-%d-%d", r.seed, r.seq)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, bkv1.AnnotationRotateRequestedAt, stamp)
	return tn.name + "/" + name, k8s.Patch(r.ctx, ba, client.RawPatch("application/merge-patch+json", []byte(patch)))
}

func (r *soakRun) deleteAccess() (string, error) {
	return r.deleteSome(func(tn *tenant) map[string]bool { return tn.accesses }, func() client.Object { return &bkv1.BucketAccess{} })
}

// raced says whether err is a race the soak means to have rather than a failure.
func raced(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) ||
		// A namespace being deleted refuses new objects (NamespaceLifecycle).
		apierrors.IsForbidden(err)
}
