package storagebucket

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// copyBucket is a copy a move left behind, behind s3.Client: a lockedBucket with the
// tags and policy a move gives it, counting every request and listing the writes.
type copyBucket struct {
	*lockedBucket
	tags     map[string]string
	policy   string
	requests int
	writes   []string
}

func (b *copyBucket) HeadBucket(context.Context, string) (string, error) {
	b.requests++
	if b.deleted {
		return "", &s3.Error{Op: "HeadBucket", Bucket: "b", Kind: s3.KindNotFound}
	}
	return "", nil
}

func (b *copyBucket) GetBucketTagging(context.Context, string) (map[string]string, error) {
	b.requests++
	return maps.Clone(b.tags), nil
}

func (b *copyBucket) GetBucketPolicy(context.Context, string) (string, error) {
	b.requests++
	return b.policy, nil
}

func (b *copyBucket) PutBucketPolicy(_ context.Context, _, policy string) error {
	b.requests++
	b.writes = append(b.writes, "PutBucketPolicy")
	b.policy = policy
	return nil
}

func (b *copyBucket) DeleteBucketPolicy(context.Context, string) error {
	b.requests++
	b.writes = append(b.writes, "DeleteBucketPolicy")
	b.policy = ""
	return nil
}

func (b *copyBucket) PutBucketTagging(_ context.Context, _ string, tags map[string]string) error {
	b.requests++
	b.writes = append(b.writes, "PutBucketTagging")
	b.tags = maps.Clone(tags)
	return nil
}

func (b *copyBucket) ListMultipartUploads(ctx context.Context, bucket string, page *s3.UploadPageToken) (s3.MultipartUploadPage, error) {
	b.requests++
	return b.lockedBucket.ListMultipartUploads(ctx, bucket, page)
}

func (b *copyBucket) ListObjectVersions(ctx context.Context, bucket string, page *s3.PageToken) (s3.ObjectVersionPage, error) {
	b.requests++
	return b.lockedBucket.ListObjectVersions(ctx, bucket, page)
}

func (b *copyBucket) DeleteObjects(ctx context.Context, bucket string, ids []s3.ObjectID) error {
	b.requests++
	b.writes = append(b.writes, "DeleteObjects")
	return b.lockedBucket.DeleteObjects(ctx, bucket, ids)
}

func (b *copyBucket) GetObjectRetention(ctx context.Context, bucket, key, version string) (s3.ObjectRetention, error) {
	b.requests++
	return b.lockedBucket.GetObjectRetention(ctx, bucket, key, version)
}

func (b *copyBucket) GetObjectLegalHold(ctx context.Context, bucket, key, version string) (bool, error) {
	b.requests++
	return b.lockedBucket.GetObjectLegalHold(ctx, bucket, key, version)
}

func (b *copyBucket) DeleteBucket(ctx context.Context, bucket string) error {
	b.requests++
	b.writes = append(b.writes, "DeleteBucket")
	return b.lockedBucket.DeleteBucket(ctx, bucket)
}

// copyRig is a live claim whose move left a frozen copy on ObjectStore "old".
type copyRig struct {
	r     *Reconciler
	sb    *bkv1.StorageBucket
	clock *clocktesting.FakeClock
	store *bkv1.ObjectStore
}

func newCopyRig(t *testing.T) *copyRig {
	t.Helper()
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "vault", UID: "claim-uid"}}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", UID: "ns-uid"}}).Build()
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(100), Stores: &stores.Registry{}, Clock: clock, SyncInterval: 4 * time.Second, ClusterID: "cluster"}
	return &copyRig{r: r, sb: sb, clock: clock, store: &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "old"}}}
}

func (g *copyRig) copyOf(b *copyBucket) bucketCopy {
	return bucketCopy{store: g.store, c: b, bucket: "b", key: "move-1/source", what: "the source of the move", frozen: true}
}

// TestLockedSourceWaitsWithoutAsking: the source of a live claim's finished move holds a
// version under a Governance retention of a day. A pass deletes what it may, puts the
// freeze back and says what keeps the rest, until when; the passes before then send
// nothing; a day later the version goes, then the bucket.
func TestLockedSourceWaitsWithoutAsking(t *testing.T) {
	g := newCopyRig(t)
	me := g.r.ownerIn(g.sb, "ns-uid")
	frozen, err := withFreeze("", "b")
	if err != nil {
		t.Fatal(err)
	}
	b := &copyBucket{lockedBucket: &lockedBucket{now: g.clock.Now, pageSize: 1000, versions: []string{"free", "kept"},
		retention: map[string]s3.ObjectRetention{"kept": {Mode: s3.RetentionGovernance, Until: g.clock.Now().Add(24 * time.Hour)}}},
		tags: me.tags(), policy: frozen}
	b.tags[bkv1.TagMovedTo] = "new/b"

	removal, err := g.r.removeCopy(context.Background(), g.sb, nil, g.copyOf(b))
	if err != nil {
		t.Fatal(err)
	}
	if removal.done || removal.wait != 24*time.Hour || !strings.Contains(removal.locked, "1 object versions an object lock keeps (1 under Governance retention)") {
		t.Fatalf("first pass: %+v; want it waiting a day for the locked version", removal)
	}
	if strings.Join(b.versions, " ") != "kept" || b.policy != frozen {
		t.Fatalf("after the first pass: versions %v, policy %q; want the free version gone and the freeze back", b.versions, b.policy)
	}

	asked := b.requests
	for range 5 {
		g.clock.Step(time.Hour)
		if removal, err := g.r.removeCopy(context.Background(), g.sb, nil, g.copyOf(b)); err != nil || removal.done {
			t.Fatalf("while locked: %+v, %v", removal, err)
		}
	}
	if b.requests != asked {
		t.Errorf("%d requests while the lock lasts, want none", b.requests-asked)
	}

	g.clock.Step(19 * time.Hour)
	for range 4 {
		removal, err = g.r.removeCopy(context.Background(), g.sb, nil, g.copyOf(b))
		if err != nil {
			t.Fatal(err)
		}
		if removal.done {
			break
		}
		g.clock.Step(max(removal.wait, time.Second))
	}
	if !removal.done || !b.deleted {
		t.Fatalf("after the retention: %+v, bucket deleted %v", removal, b.deleted)
	}
}

// TestCopyNotOursIsLeftAlone: a bucket of the copy's name that is another claim's,
// another cluster's, or untagged (and not recorded as the move's) is neither thawed,
// emptied, tagged nor deleted: two reads, no write.
func TestCopyNotOursIsLeftAlone(t *testing.T) {
	g := newCopyRig(t)
	frozen, err := withFreeze("", "b")
	if err != nil {
		t.Fatal(err)
	}
	for name, tags := range map[string]map[string]string{
		"another claim's":   {bkv1.TagClaim: "tenant/other", bkv1.TagUID: "other-uid/ns-uid", bkv1.TagCluster: "cluster"},
		"another cluster's": {bkv1.TagClaim: "tenant/vault", bkv1.TagUID: "other-uid", bkv1.TagCluster: "elsewhere"},
		"untagged":          {},
	} {
		t.Run(name, func(t *testing.T) {
			b := &copyBucket{lockedBucket: &lockedBucket{now: g.clock.Now, pageSize: 1000, versions: []string{"theirs"}}, tags: tags, policy: frozen}
			removal, err := g.r.removeCopy(context.Background(), g.sb, nil, g.copyOf(b))
			if err != nil || !removal.done || !removal.notOurs {
				t.Fatalf("%+v, %v; want it done with, as not the claim's", removal, err)
			}
			if len(b.writes) > 0 || b.requests != 2 || b.policy != frozen || len(b.versions) != 1 || !maps.Equal(b.tags, tags) {
				t.Errorf("%d requests, writes %v, policy %q, versions %v, tags %v; want two reads and the bucket as it was", b.requests, b.writes, b.policy, b.versions, b.tags)
			}
		})
	}
}
