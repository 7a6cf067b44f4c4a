package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The steps of a rotation after which a manager is killed: the new key exists on
// the store but nowhere else; the Secret holds the new key but the status never
// recorded the rotation; the old key is deleted but the status still counts it.
const (
	afterCreateKey    = "after CreateKey"
	afterSecretWrite  = "after the Secret write"
	afterDeleteOldKey = "after DeleteKey of the old key"
)

// rotationGrace is the old key's grace in these tests: long enough to be a real
// phase of the rotation, short enough to end within a test.
const rotationGrace = time.Second

// TestPacedBucketAccessRotationSurvivesManagerKills: a manager stopped right after each
// step of a rotation took effect on the real servers leaves a state the next manager
// converges from: the access Ready, the rotation handled, one key on the store and
// in the Secret, that key working and every other key rejected; never more than two
// keys on the store at any observation.
func TestPacedBucketAccessRotationSurvivesManagerKills(t *testing.T) {
	for _, srv := range everyStore() {
		for _, step := range []string{afterCreateKey, afterSecretWrite, afterDeleteOldKey} {
			t.Run(string(srv.Kind)+"/"+step, func(t *testing.T) { testRotationKilledAt(t, srv, step) })
		}
	}
}

func testRotationKilledAt(t *testing.T, srv *testenv.S3Server, step string) {
	f := newFixture(t, srv, withIAMOn(srv))
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	isolated := map[string]string{isolatedLabel: f.ns}
	sb := f.bucket("data", func(sb *bkv1.StorageBucket) { sb.Labels = isolated })
	ba := &bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app", Labels: isolated},
		Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "data"}}, SecretName: "app-creds"},
	}
	must(t, k8s.Create(f.ctx, ba))
	// Only this test's own managers see these objects: whatever happens, one of them
	// must finish their deletion, or their finalizers stay for good.
	t.Cleanup(func() { f.deleteIsolated(ba, sb) })

	// The first manager issues key 1, then is stopped inside the rotation.
	trap := &rotationTrap{step: step, hit: make(chan struct{})}
	trapped := func(ctx context.Context, c iam.Config) (iam.Driver, error) {
		d, err := iam.New(ctx, c)
		return trappedDriver{Driver: d, trap: trap}, err
	}
	restCfg := rest.CopyConfig(cfg)
	restCfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return secretWriteTrap{next: next, trap: trap} })
	ctx1, stopFirst := context.WithCancel(f.ctx)
	defer stopFirst()
	firstDone, err := startManagerOn(ctx1, restCfg, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, IAMFactory: trapped, AccessKeyGrace: rotationGrace})
	must(t, err)
	defer func() { stopFirst(); <-firstDone }()

	sbReady := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sbReady.Status.BucketName
	issued := f.waitAccessReady(ba)
	user := issued.Status.IdentityName
	key1 := f.secretClient("app-creds")
	must(t, key1.c.PutObject(f.ctx, bucket, "before", []byte("x")))

	watch := watchKeyCount(f, srv, user)
	trap.arm(user, key1.id, "/api/v1/namespaces/"+f.ns+"/secrets/app-creds")
	const request = "kill-test"
	must(t, patchAnnotation(f.ctx, ba, bkv1.AnnotationRotateRequestedAt, request))
	select {
	case <-trap.hit:
	case <-time.After(90 * time.Second):
		t.Fatalf("the first manager never reached the step %q", step)
	}
	stopFirst()
	<-firstDone

	// The state the killed manager left, as each step must leave it.
	left := f.secretClient("app-creds")
	onStore := storeKeys(t, srv, user)
	switch step {
	case afterCreateKey:
		orphan := trap.createdKey()
		if left.id != key1.id || !slices.Contains(onStore, orphan.ID) || len(onStore) != 2 {
			t.Fatalf("setup: want key 1 %s in the Secret and the new key %s on the store beside it; Secret %s, store %v", key1.id, orphan.ID, left.id, onStore)
		}
	case afterSecretWrite:
		got := &bkv1.BucketAccess{}
		must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(ba), got))
		if left.id == key1.id || len(onStore) != 2 || got.Status.Rotation.LastHandledRequest == request {
			t.Fatalf("setup: want the new key in the Secret, two keys on the store and the rotation unrecorded; Secret %s, store %v, status %+v", left.id, onStore, got.Status.Rotation)
		}
	case afterDeleteOldKey:
		if left.id == key1.id || !slices.Equal(onStore, []string{left.id}) {
			t.Fatalf("setup: want only the new key %s on the store and in the Secret; Secret %s, store %v", left.id, left.id, onStore)
		}
	}

	// A manager without the trap (it only records when keys go) converges.
	recorder := &rotationTrap{hit: make(chan struct{})}
	recorder.arm(user, key1.id, "")
	recording := func(ctx context.Context, c iam.Config) (iam.Driver, error) {
		d, err := iam.New(ctx, c)
		return trappedDriver{Driver: d, trap: recorder}, err
	}
	restarted := time.Now()
	ctx2, stopSecond := context.WithCancel(f.ctx)
	secondDone, err := startManager(ctx2, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, AccessKeyGrace: rotationGrace, IAMFactory: recording})
	must(t, err)
	defer func() { stopSecond(); <-secondDone }()
	var final *bkv1.BucketAccess
	f.eventually(90*time.Second, "the rotation handled with one key on the store, in the Secret and in status", func() error {
		got := &bkv1.BucketAccess{}
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(ba), got); err != nil {
			return err
		}
		r := got.Status.Rotation
		if !conditionTrue(got.Status.Conditions, bkv1.ConditionReady) || r.LastHandledRequest != request || r.State != bkv1.RotationIdle {
			return fmt.Errorf("rotation %+v; conditions %s", r, describe(got.Status.Conditions))
		}
		keys := storeKeys(t, srv, user)
		secret := f.secretClient("app-creds")
		if !slices.Equal(keys, []string{got.Status.AccessKeyID}) || secret.id != got.Status.AccessKeyID {
			return fmt.Errorf("store %v, Secret %s, status %s", keys, secret.id, got.Status.AccessKeyID)
		}
		final = got
		return nil
	})
	current := f.secretClient("app-creds")
	if current.id == key1.id {
		t.Fatalf("the Secret still holds the old key %s", key1.id)
	}
	must(t, current.c.PutObject(f.ctx, bucket, "after", []byte("x")))
	if body, err := current.c.GetObject(f.ctx, bucket, "before", 10); err != nil || string(body) != "x" {
		t.Errorf("the Secret's key %s cannot read the bucket: %q, %v", current.id, body, err)
	}
	f.waitKeyRejected(key1, bucket)
	// The old key, which pods may still use, is deleted only after its grace: after
	// the new key was made if the first manager deleted it, after the restart if
	// the second did (the restart lost the first grace's start with the status).
	killer := recorder
	if step == afterDeleteOldKey {
		killer = trap
		restarted = time.Time{}
	}
	if lived, ok := killer.oldKeyLived(restarted); !ok {
		t.Errorf("the old key %s was not deleted by the expected manager", key1.id)
	} else if lived < rotationGrace {
		t.Errorf("the old key %s was deleted %s after its successor (or the restart), before its grace of %s", key1.id, lived, rotationGrace)
	}
	if step == afterCreateKey {
		// The key the killed manager made never reached a Secret: it must not work.
		orphan := trap.createdKey()
		c, err := s3.New(f.ctx, s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
			AccessKeyID: orphan.ID, SecretAccessKey: orphan.Secret, RequestTimeout: 10 * time.Second})
		must(t, err)
		f.waitKeyRejected(secretKey{id: orphan.ID, c: c}, bucket)
	}

	if most, seen := watch.stop(); most > iam.MaxKeys {
		t.Errorf("the user had %d keys at once (%v); at most %d are allowed", most, seen, iam.MaxKeys)
	} else {
		t.Logf("%s: at most %d keys seen; final key %s; observations per key count %v, %d errors (%v)", step, most, final.Status.AccessKeyID, watch.counts, watch.errs, watch.lastErr)
	}
}

// rotationTrap lets the chosen call of one user's rotation take effect, then hangs
// it until its manager is stopped: the window in which a real crash leaves the
// store or the Secret one step ahead of the status. It is armed only once key 1 is
// issued, and only for the test's own user and Secret.
type rotationTrap struct {
	step string
	hit  chan struct{}

	mu         sync.Mutex
	armed      bool
	user       string
	oldKey     string
	secretPath string
	created    iam.AccessKey
	once       sync.Once
	// When the user's first new key was created and when each key was deleted,
	// once armed: the old key must outlive its successor by the grace.
	createdAt time.Time
	deletedAt map[string]time.Time
}

func (t *rotationTrap) arm(user, oldKey, secretPath string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed, t.user, t.oldKey, t.secretPath = true, user, oldKey, secretPath
	t.deletedAt = map[string]time.Time{}
}

// oldKeyLived is how long after since (zero: the first new key) the old key was
// deleted; ok is false if it was not deleted through this trap.
func (t *rotationTrap) oldKeyLived(since time.Time) (lived time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.deletedAt[t.oldKey]
	if since.IsZero() {
		since = t.createdAt
	}
	return at.Sub(since), ok
}

func (t *rotationTrap) fires(step, user string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.armed && t.step == step && t.user == user
}

func (t *rotationTrap) firesOnSecret(path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.armed && t.step == afterSecretWrite && t.secretPath == path
}

func (t *rotationTrap) createdKey() iam.AccessKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.created
}

// hang reports the hit and blocks until the manager's context ends.
func (t *rotationTrap) hang(ctx context.Context) error {
	t.once.Do(func() { close(t.hit) })
	<-ctx.Done()
	return ctx.Err()
}

type trappedDriver struct {
	iam.Driver
	trap *rotationTrap
}

func (d trappedDriver) CreateKey(ctx context.Context, user string) (iam.AccessKey, error) {
	key, err := d.Driver.CreateKey(ctx, user)
	d.trap.mu.Lock()
	if err == nil && d.trap.armed && user == d.trap.user && d.trap.createdAt.IsZero() {
		d.trap.createdAt = time.Now()
	}
	d.trap.mu.Unlock()
	if err != nil || !d.trap.fires(afterCreateKey, user) {
		return key, err
	}
	d.trap.mu.Lock()
	d.trap.created = key
	d.trap.mu.Unlock()
	return iam.AccessKey{}, d.trap.hang(ctx)
}

func (d trappedDriver) DeleteKey(ctx context.Context, user, keyID string) error {
	if err := d.Driver.DeleteKey(ctx, user, keyID); err != nil {
		return err
	}
	d.trap.mu.Lock()
	if d.trap.armed && user == d.trap.user {
		d.trap.deletedAt[keyID] = time.Now()
	}
	d.trap.mu.Unlock()
	if !d.trap.fires(afterDeleteOldKey, user) {
		return nil
	}
	d.trap.mu.Lock()
	old := d.trap.oldKey
	d.trap.mu.Unlock()
	if keyID != old {
		return nil
	}
	return d.trap.hang(ctx)
}

// secretWriteTrap lets the first successful update of the trapped Secret reach the
// API server, then hangs the request: the manager dies before it records the
// rotation in status.
type secretWriteTrap struct {
	next http.RoundTripper
	trap *rotationTrap
}

func (s secretWriteTrap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPut || resp.StatusCode >= 300 || !s.trap.firesOnSecret(req.URL.Path) {
		return resp, err
	}
	_ = resp.Body.Close()
	return nil, s.trap.hang(req.Context())
}

// keyCountWatch lists a user's keys on the store over and over until stopped and
// keeps the largest count seen: rotation must never hold more than two.
type keyCountWatch struct {
	stopCh, done chan struct{}
	most         int
	seen         []string
	counts       map[int]int // observations per number of keys
	errs         int
	lastErr      error
}

func watchKeyCount(f *fixture, srv *testenv.S3Server, user string) *keyCountWatch {
	w := &keyCountWatch{stopCh: make(chan struct{}), done: make(chan struct{}), counts: map[int]int{}}
	go func() {
		defer close(w.done)
		for {
			out, err := srv.IAMClient().ListAccessKeys(f.ctx, &awsiam.ListAccessKeysInput{UserName: aws.String(user)})
			if err != nil {
				w.errs, w.lastErr = w.errs+1, err
			} else {
				w.counts[len(out.AccessKeyMetadata)]++
			}
			if err == nil && len(out.AccessKeyMetadata) > w.most {
				w.most, w.seen = len(out.AccessKeyMetadata), nil
				for _, k := range out.AccessKeyMetadata {
					w.seen = append(w.seen, aws.ToString(k.AccessKeyId))
				}
			}
			select {
			case <-w.stopCh:
				return
			case <-f.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *keyCountWatch) stop() (most int, seen []string) {
	close(w.stopCh)
	<-w.done
	return w.most, w.seen
}

// storeKeys lists a user's key ids on the store, sorted.
func storeKeys(t *testing.T, srv *testenv.S3Server, user string) []string {
	t.Helper()
	out, err := srv.IAMClient().ListAccessKeys(context.Background(), &awsiam.ListAccessKeysInput{UserName: aws.String(user)})
	must(t, err)
	var ids []string
	for _, k := range out.AccessKeyMetadata {
		ids = append(ids, aws.ToString(k.AccessKeyId))
	}
	slices.Sort(ids)
	return ids
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// deleteIsolated deletes a test's isolated access and bucket under a fresh manager
// of its own and waits until both are gone, so no finalizer is left for a manager
// that will never run again.
func (f *fixture) deleteIsolated(objs ...client.Object) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	managerCtx, stopManager := context.WithCancel(ctx)
	defer stopManager()
	done, err := startManager(managerCtx, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, AccessKeyGrace: rotationGrace})
	if err != nil {
		f.t.Errorf("cleanup manager: %v", err)
		return
	}
	defer func() { stopManager(); <-done }()
	for _, obj := range objs {
		_ = k8s.Delete(ctx, obj)
		f.eventually(time.Minute, "deletion of "+obj.GetName(), func() error {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if err == nil {
				return fmt.Errorf("still there")
			}
			return client.IgnoreNotFound(err)
		})
	}
}
