package storagebucket

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// uploadsBucket is a bucket of nothing but incomplete multipart uploads behind
// s3.Client, counting the requests a purge sends.
type uploadsBucket struct {
	s3.Client
	uploads  []s3.MultipartUpload
	requests int
	deleted  bool
}

func (b *uploadsBucket) ListMultipartUploads(context.Context, string, *s3.UploadPageToken) (s3.MultipartUploadPage, error) {
	b.requests++
	n := min(len(b.uploads), 1000)
	return s3.MultipartUploadPage{Uploads: append([]s3.MultipartUpload(nil), b.uploads[:n]...)}, nil
}

func (b *uploadsBucket) AbortMultipartUpload(_ context.Context, _, _, id string) error {
	b.requests++
	for i, u := range b.uploads {
		if u.UploadID == id {
			b.uploads = append(b.uploads[:i], b.uploads[i+1:]...)
			break
		}
	}
	return nil
}

func (b *uploadsBucket) ListObjectVersions(context.Context, string, *s3.PageToken) (s3.ObjectVersionPage, error) {
	b.requests++
	return s3.ObjectVersionPage{}, nil
}

func (b *uploadsBucket) DeleteBucket(context.Context, string) error {
	b.requests++
	b.deleted = true
	return nil
}

// TestPurgeSpendsOnlyItsBudget: a tenant's bucket with 300 incomplete uploads, each of
// which costs a request to abort, on a store whose purge budget is 10 requests a second
// with a burst of 20. No pass sends more than the budget has; each pass asks to wait
// until the budget refills; the purge still finishes and deletes the bucket.
func TestPurgeSpendsOnlyItsBudget(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	bucket := &uploadsBucket{}
	for i := range 300 {
		bucket.uploads = append(bucket.uploads, s3.MultipartUpload{Key: fmt.Sprintf("k%d", i), UploadID: fmt.Sprint(i)})
	}
	r := &Reconciler{Clock: clock, Recorder: events.NewFakeRecorder(100)}
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "big", UID: "u"}}
	budget := rate.NewLimiter(10, 20)
	budget.AllowN(clock.Now(), 0) // starts full at the fake clock's time
	spend := purgeSpender{budget: budget, now: clock.Now}

	passes := 0
	for !bucket.deleted {
		passes++
		if passes > 100 {
			t.Fatalf("not done after %d passes: %d uploads left", passes-1, len(bucket.uploads))
		}
		before := bucket.requests
		patcher := reconcile.NewStatusPatcher(nil, sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
		done, err := r.purgeBucket(context.Background(), sb, patcher, bucket, "big", spend)
		if err != nil {
			t.Fatal(err)
		}
		if sent := bucket.requests - before; sent > 20 {
			t.Fatalf("pass %d sent %d requests, more than the budget's burst of 20", passes, sent)
		}
		if done {
			break
		}
		wait := r.purges.nextPassIn(sb.UID, clock.Now())
		if len(bucket.uploads) > 0 && wait <= 0 {
			t.Fatalf("pass %d left %d uploads and the budget empty, yet asks for no wait", passes, len(bucket.uploads))
		}
		clock.Step(max(wait, time.Second))
	}
	if !bucket.deleted || len(bucket.uploads) != 0 {
		t.Fatalf("purge ended with %d uploads left, bucket deleted %v", len(bucket.uploads), bucket.deleted)
	}
	// 300 aborts and a few listings at 10 a second: about 30 s of the fake clock, in
	// passes of at most the burst.
	if passes < 300/20 {
		t.Errorf("%d passes: the budget did not pace the purge", passes)
	}
	t.Logf("%d passes, %d requests", passes, bucket.requests)
}

// TestPurgeLiftsTheOperatorsPolicyFirst: before a purge's first pass the operator
// deletes the policy it set, once, so a tenant's Deny of the data actions a purge lists
// and deletes with cannot keep the claim from being deleted; a store that refuses the
// deletion does not stop the purge. A policy the operator never set (an adopted
// bucket's) stays.
func TestPurgeLiftsTheOperatorsPolicyFirst(t *testing.T) {
	ctx := context.Background()
	r := &Reconciler{}
	mine := newSpecBucket() // its create intent names bucket "b"
	f := &fakeS3{policy: `{"Statement":[]}`}
	for range 2 {
		if err := r.liftPolicyBeforePurge(ctx, mine, f, "b"); err != nil {
			t.Fatal(err)
		}
	}
	if f.policy != "" || len(f.writes) != 1 {
		t.Errorf("policy %q after writes %v; want it deleted, once", f.policy, f.writes)
	}

	adopted := newSpecBucket()
	adopted.UID, adopted.Status.CreateIntent = "2222-bbbb", nil
	f = &fakeS3{policy: `{"Statement":[]}`}
	if err := r.liftPolicyBeforePurge(ctx, adopted, f, "b"); err != nil || len(f.writes) != 0 {
		t.Errorf("adopted bucket: err = %v, writes %v; want its policy left alone", err, f.writes)
	}

	refused := newSpecBucket()
	refused.UID, refused.Status.CreateIntent.UID = "3333-cccc", "3333-cccc"
	f = &fakeS3{policy: `{"Statement":[]}`, errs: map[string]error{"DeleteBucketPolicy": s3Err("DeleteBucketPolicy", s3.KindAccessDenied)}}
	if err := r.liftPolicyBeforePurge(ctx, refused, f, "b"); err != nil {
		t.Errorf("refused by the store: err = %v, want the purge to go on", err)
	}
	f = &fakeS3{errs: map[string]error{"DeleteBucketPolicy": s3Err("DeleteBucketPolicy", s3.KindUnreachable)}}
	other := newSpecBucket()
	other.UID, other.Status.CreateIntent.UID = "4444-dddd", "4444-dddd"
	if err := r.liftPolicyBeforePurge(ctx, other, f, "b"); err == nil {
		t.Error("unreachable store: no error, want the pass retried")
	}
}
