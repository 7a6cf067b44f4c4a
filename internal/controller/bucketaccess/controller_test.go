package bucketaccess

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// These tests add to the integration tests against real servers: an in-memory IAM
// store lets them stop the operator after every single call of a rotation and prove
// that a fresh process (with no memory) converges to one working key, never holding
// more than two. The fake clock drives the grace period.

// errCrash stands for the process dying right after a call took effect.
var errCrash = errors.New("crash")

// memIAM is an in-memory IAM store: users, policies and keys.
type memIAM struct {
	mu      sync.Mutex
	keys    map[string][]iam.AccessKey // user -> keys
	users   map[string]bool
	policy  map[string]string
	clock   *clocktesting.FakeClock
	next    int
	maxSeen int
	// crash, when set, is consulted after every mutating call took effect.
	crash func(op string) error
	// allInOnePage makes ListUsers answer every user in one page whatever its limit,
	// as SeaweedFS does.
	allInOnePage bool
	// keyLists counts ListKeys per user.
	keyLists map[string]int
	// grants are the grants of each user's last PutPolicy.
	grants map[string][]iam.Grant
}

func (m *memIAM) after(op string) error {
	if m.crash != nil {
		return m.crash(op)
	}
	return nil
}

func (m *memIAM) Check(context.Context) error { return nil }

func (m *memIAM) EnsureUser(_ context.Context, user string) error {
	m.mu.Lock()
	m.users[user] = true
	m.mu.Unlock()
	return m.after("CreateUser")
}

func (m *memIAM) PutPolicy(_ context.Context, user string, grants []iam.Grant) error {
	doc, err := iam.PolicyDocument(grants)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.policy[user] = doc
	if m.grants == nil {
		m.grants = map[string][]iam.Grant{}
	}
	m.grants[user] = grants
	m.mu.Unlock()
	return m.after("PutUserPolicy")
}

func (m *memIAM) DeletePolicy(_ context.Context, user string) error {
	m.mu.Lock()
	delete(m.policy, user)
	m.mu.Unlock()
	return m.after("DeleteUserPolicy")
}

func (m *memIAM) ListKeys(_ context.Context, user string) ([]iam.AccessKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keyLists == nil {
		m.keyLists = map[string]int{}
	}
	m.keyLists[user]++
	if !m.users[user] {
		return nil, &iam.Error{Op: "ListAccessKeys", Kind: iam.KindNoSuchEntity}
	}
	out := make([]iam.AccessKey, 0, len(m.keys[user]))
	for _, k := range m.keys[user] {
		out = append(out, iam.AccessKey{ID: k.ID, Created: k.Created})
	}
	return out, nil
}

func (m *memIAM) CreateKey(_ context.Context, user string) (iam.AccessKey, error) {
	m.mu.Lock()
	if len(m.keys[user]) >= 2 {
		m.mu.Unlock()
		return iam.AccessKey{}, &iam.Error{Op: "CreateAccessKey", Kind: iam.KindLimitExceeded}
	}
	m.next++
	k := iam.AccessKey{ID: fmt.Sprintf("AK%04d", m.next), Secret: fmt.Sprintf("secret-%04d", m.next), Created: m.clock.Now().Add(time.Duration(m.next) * time.Millisecond)}
	m.keys[user] = append(m.keys[user], k)
	m.maxSeen = max(m.maxSeen, len(m.keys[user]))
	m.mu.Unlock()
	return k, m.after("CreateAccessKey")
}

func (m *memIAM) DeleteKey(_ context.Context, user, id string) error {
	m.mu.Lock()
	var keep []iam.AccessKey
	for _, k := range m.keys[user] {
		if k.ID != id {
			keep = append(keep, k)
		}
	}
	m.keys[user] = keep
	m.mu.Unlock()
	return m.after("DeleteAccessKey")
}

func (m *memIAM) DeleteUser(_ context.Context, user string) error {
	m.mu.Lock()
	delete(m.keys, user)
	delete(m.users, user)
	delete(m.policy, user)
	m.mu.Unlock()
	return m.after("DeleteUser")
}

// ListUsers pages through the users in name order; the marker is the last name of
// the page before.
func (m *memIAM) ListUsers(_ context.Context, marker string, limit int) (iam.UserPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.users))
	for u := range m.users {
		if u > marker {
			names = append(names, u)
		}
	}
	slices.Sort(names)
	if m.allInOnePage {
		return iam.UserPage{Names: names}, nil
	}
	page := iam.UserPage{Names: names[:min(limit, len(names))]}
	if len(names) > limit {
		page.Next = page.Names[limit-1]
	}
	return page, nil
}

// works says whether a key pair is valid on the store.
func (m *memIAM) works(id, secret string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, keys := range m.keys {
		for _, k := range keys {
			if k.ID == id && k.Secret == secret {
				return true
			}
		}
	}
	return false
}

// keyChecker is an S3 client whose HeadBucket succeeds for keys memIAM knows.
type keyChecker struct {
	s3.Client
	m          *memIAM
	id, secret string
}

func (k keyChecker) HeadBucket(context.Context, string) (string, error) {
	if k.m.works(k.id, k.secret) {
		return "", nil
	}
	return "", &s3.Error{Op: "HeadBucket", Kind: s3.KindInvalidCredentials}
}

type accessRig struct {
	t     *testing.T
	mem   *memIAM
	c     client.Client
	clock *clocktesting.FakeClock
	// others are the IAM stores of other endpoints than the rig's store (other
	// accounts), by endpoint.
	others map[string]*memIAM
	// crash, when set, is consulted after every Secret write took effect.
	secretCrash func() error
}

func newAccessRig(t *testing.T) *accessRig {
	scheme := runtime.NewScheme()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(clientgoscheme.AddToScheme(scheme))
	must(bkv1.AddToScheme(scheme))
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rig := &accessRig{t: t, clock: clk, mem: &memIAM{keys: map[string][]iam.AccessKey{}, users: map[string]bool{}, policy: map[string]string{}, clock: clk}}
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store", UID: "store-uid"}, Spec: bkv1.ObjectStoreSpec{
		Endpoint: "http://127.0.0.1:1", ForcePathStyle: true, AccessProvider: &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM},
	}}
	sb := &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"},
		Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "store"}},
		Status: bkv1.StorageBucketStatus{BucketName: "ns-data", Conditions: []metav1.Condition{{
			Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady, LastTransitionTime: metav1.Now(),
		}}},
	}
	ba := &bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "access-uid", Finalizers: []string{bkv1.Finalizer}},
		Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "data", Mode: bkv1.AccessReadWrite}}, SecretName: "app-creds"},
	}
	secretWrite := func(ctx context.Context, c client.WithWatch, obj client.Object, write func() error) error {
		if err := write(); err != nil {
			return err
		}
		if _, ok := obj.(*corev1.Secret); ok && rig.secretCrash != nil {
			return rig.secretCrash()
		}
		return nil
	}
	rig.c = fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(store, sb, ba).
		WithStatusSubresource(&bkv1.BucketAccess{}, &bkv1.StorageBucket{}, &bkv1.ObjectStore{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				return secretWrite(ctx, c, obj, func() error { return c.Create(ctx, obj, opts...) })
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				return secretWrite(ctx, c, obj, func() error { return c.Update(ctx, obj, opts...) })
			},
		}).Build()
	return rig
}

// reconciler is a fresh operator process: no memory of earlier ones.
func (r *accessRig) reconciler() *Reconciler {
	registry := &stores.Registry{Client: r.c, APIReader: r.c, Factory: func(_ context.Context, cfg s3.Config) (s3.Client, error) {
		return keyChecker{m: r.memOf(cfg.Endpoint), id: cfg.AccessKeyID, secret: cfg.SecretAccessKey}, nil
	}}
	return &Reconciler{
		Client: r.c, Recorder: events.NewFakeRecorder(1000), Stores: registry, Clock: r.clock,
		Access: &stores.AccessProviders{Stores: registry, Factory: func(_ context.Context, cfg iam.Config) (iam.Driver, error) {
			return r.memOf(cfg.Endpoint), nil
		}},
		ClusterID: "test", KeyGrace: 10 * time.Minute, SyncInterval: time.Hour,
	}
}

// memOf is the IAM store of an endpoint.
func (r *accessRig) memOf(endpoint string) *memIAM {
	if m := r.others[endpoint]; m != nil {
		return m
	}
	return r.mem
}

func (r *accessRig) access() *bkv1.BucketAccess {
	ba := &bkv1.BucketAccess{}
	if err := r.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "app"}, ba); err != nil {
		r.t.Fatal(err)
	}
	return ba
}

// check asserts the invariants that must hold after any call: at most two keys, and
// a Secret (once written) whose key works.
func (r *accessRig) check(when string) {
	r.t.Helper()
	user := iam.UserName("test", "access-uid")
	if n := len(r.mem.keys[user]); n > 2 {
		r.t.Fatalf("%s: %d keys on the store", when, n)
	}
	secret := &corev1.Secret{}
	if err := r.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "app-creds"}, secret); err == nil {
		if !r.mem.works(string(secret.Data[bkv1.AccessSecretKeyAccessKeyID]), string(secret.Data[bkv1.AccessSecretKeySecretKey])) {
			r.t.Fatalf("%s: the Secret's key %s does not work", when, secret.Data[bkv1.AccessSecretKeyAccessKeyID])
		}
	}
}

// settle reconciles with fresh processes until the access is Ready, Idle and has
// handled request, advancing the fake clock past any grace period.
func (r *accessRig) settle(request string) {
	r.t.Helper()
	rec := r.reconciler()
	for i := 0; i < 20; i++ {
		_, err := rec.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "app"}})
		r.check(fmt.Sprintf("reconcile %d", i))
		if errors.Is(err, errCrash) {
			rec = r.reconciler()
			continue
		}
		ba := r.access()
		if ba.Status.Rotation.State == bkv1.RotationGrace {
			r.clock.Step(11 * time.Minute)
			continue
		}
		if ba.Status.Rotation.State == bkv1.RotationIdle && reconcile.ConditionIsTrue(ba.Status.Conditions, bkv1.ConditionReady) &&
			ba.Status.Rotation.LastHandledRequest == request && len(r.mem.keys[iam.UserName("test", "access-uid")]) == 1 {
			return
		}
	}
	r.t.Fatalf("did not settle: %+v", r.access().Status)
}

func TestBucketAccessRotationConvergesAfterACrashAtEveryStep(t *testing.T) {
	// Count the calls of one clean rotation, then crash after each of them in turn.
	rig := newAccessRig(t)
	rig.settle("")
	var calls int
	rig.mem.crash = func(string) error { calls++; return nil }
	rig.secretCrash = func() error { calls++; return nil }
	rotate(t, rig, "count")
	rig.settle("count")
	total := calls
	if total < 3 {
		t.Fatalf("a rotation made only %d calls", total)
	}
	for crashAt := 1; crashAt <= total; crashAt++ {
		t.Run(fmt.Sprintf("crash after call %d", crashAt), func(t *testing.T) {
			rig := newAccessRig(t)
			rig.settle("")
			before := rig.access().Status.AccessKeyID
			n := 0
			crash := func() error {
				n++
				if n == crashAt {
					return errCrash
				}
				return nil
			}
			rig.mem.crash = func(string) error { return crash() }
			rig.secretCrash = crash
			request := fmt.Sprintf("r%d", crashAt)
			rotate(t, rig, request)
			rig.settle(request)
			if after := rig.access().Status.AccessKeyID; after == before {
				t.Errorf("key not rotated: still %s", after)
			}
			if rig.mem.maxSeen > 2 {
				t.Errorf("%d keys existed at once", rig.mem.maxSeen)
			}
		})
	}
}

func TestBucketAccessPeriodicRotationUsesTheClock(t *testing.T) {
	rig := newAccessRig(t)
	ba := rig.access()
	ba.Spec.Rotation = &bkv1.KeyRotation{Every: metav1.Duration{Duration: 24 * time.Hour}}
	if err := rig.c.Update(context.Background(), ba); err != nil {
		t.Fatal(err)
	}
	rig.settle("")
	first := rig.access().Status.AccessKeyID
	rig.clock.Step(23 * time.Hour)
	rig.settle("")
	if got := rig.access().Status.AccessKeyID; got != first {
		t.Fatalf("rotated after 23h of a 24h period: %s -> %s", first, got)
	}
	rig.clock.Step(2 * time.Hour)
	rig.settle("")
	if got := rig.access().Status.AccessKeyID; got == first {
		t.Fatalf("not rotated after 25h of a 24h period")
	}
}

func TestBucketAccessRemovesUnknownKeys(t *testing.T) {
	rig := newAccessRig(t)
	rig.settle("")
	user := iam.UserName("test", "access-uid")
	stray, err := rig.mem.CreateKey(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	rig.settle("")
	if rig.mem.works(stray.ID, stray.Secret) {
		t.Errorf("a key the operator did not make survived a reconcile")
	}
}

func rotate(t *testing.T, rig *accessRig, request string) {
	t.Helper()
	ba := rig.access()
	if ba.Annotations == nil {
		ba.Annotations = map[string]string{}
	}
	ba.Annotations[bkv1.AnnotationRotateRequestedAt] = request
	if err := rig.c.Update(context.Background(), ba); err != nil {
		t.Fatal(err)
	}
}
