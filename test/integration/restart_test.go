package integration_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// crashAfterCreate lets CreateBucket through and then hangs the first tagging call until
// the manager is stopped: the window in which a real crash leaves an untagged bucket.
// With tagFirst, the tags are written before it hangs: the window in which a crash
// leaves a tagged bucket whose name never reached status.bucketName.
type crashAfterCreate struct {
	s3.Client
	bucket   string // only this bucket's first pass is cut short
	once     *sync.Once
	created  chan struct{}
	tagFirst bool
}

func (c crashAfterCreate) PutBucketTagging(ctx context.Context, bucket string, tags map[string]string) error {
	if bucket != c.bucket {
		return c.Client.PutBucketTagging(ctx, bucket, tags)
	}
	if c.tagFirst {
		if err := c.Client.PutBucketTagging(ctx, bucket, tags); err != nil {
			return err
		}
	}
	c.once.Do(func() { close(c.created) })
	<-ctx.Done()
	return ctx.Err()
}

// stopMidCreate runs a manager that stops inside the first pass of a new claim (after
// CreateBucket; after tagging too with tagFirst) and returns the claim as the manager
// left it: bucket created, status.bucketName never written.
func stopMidCreate(t *testing.T, f *fixture, name string, tagFirst bool, mutate ...func(*bkv1.StorageBucket)) *bkv1.StorageBucket {
	t.Helper()
	created := make(chan struct{})
	once := &sync.Once{}
	crashing := func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
		c, err := s3.New(ctx, cfg)
		return crashAfterCreate{Client: c, bucket: naming.BucketName("", f.ns, name), once: once, created: created, tagFirst: tagFirst}, err
	}
	ctx, stopFirst := context.WithCancel(f.ctx)
	defer stopFirst()
	firstDone, err := startManager(ctx, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, S3Factory: crashing})
	must(t, err)

	sb := f.bucket(name, append([]func(*bkv1.StorageBucket){func(sb *bkv1.StorageBucket) { sb.Labels = map[string]string{isolatedLabel: f.ns} }}, mutate...)...)
	select {
	case <-created:
	case <-time.After(60 * time.Second):
		t.Fatal("the first manager never created the bucket")
	}
	stopFirst()
	<-firstDone
	cur := f.get(sb)
	if cur.Status.BucketName != "" {
		t.Fatalf("setup: status.bucketName %q was written; the interruption came too late", cur.Status.BucketName)
	}
	intent := cur.Status.CreateIntent
	if intent == nil || intent.BucketName == "" || intent.UID != cur.UID {
		t.Fatalf("the create intent was not recorded in status before CreateBucket: %+v", intent)
	}
	return cur
}

// TestManagerStoppedMidCreate: a manager stopped between creating and tagging a bucket
// leaves an untagged bucket; the next manager must finish the job (one bucket, Ready)
// instead of refusing it as someone else's or creating a second one.
func TestManagerStoppedMidCreate(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := stopMidCreate(t, f, "interrupted", false)
	bucket := sb.Status.CreateIntent.BucketName
	if tags, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || len(tags) != 0 {
		t.Fatalf("setup: want an existing untagged bucket, got tags %v, %v", tags, err)
	}

	ctx2, stopSecond := context.WithCancel(f.ctx)
	secondDone, err := startManager(ctx2, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns})
	must(t, err)
	defer func() { stopSecond(); <-secondDone }()
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if got.Status.BucketName != bucket {
		t.Fatalf("after restart the claim has bucket %q, want %q", got.Status.BucketName, bucket)
	}
	names, err := f.admin.ListBuckets(f.ctx)
	must(t, err)
	owned := 0
	for _, n := range names {
		if tags, err := f.admin.GetBucketTagging(f.ctx, n); err == nil && tags[bkv1.TagClaim] == f.ns+"/interrupted" {
			owned++
		}
	}
	if owned != 1 {
		t.Fatalf("%d buckets carry this claim, want exactly 1", owned)
	}
	// Only the second manager sees this object, so it must also finish its deletion.
	must(t, k8s.Delete(f.ctx, got))
	f.waitGone(got)
}

// TestClaimDeletedMidFirstPass: a claim deleted while its first pass was cut short (after
// CreateBucket, before or after tagging, always before status.bucketName was written)
// still carries out its deletion policy, and creating it again converges. Before, the
// finalizer went without acting: the bucket leaked, tagged with a dead UID.
func TestClaimDeletedMidFirstPass(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tagFirst bool
	}{{"after create", false}, {"after tagging", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, seaweed)
			sb := stopMidCreate(t, f, "first-pass", tc.tagFirst, func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete })
			bucket := sb.Status.CreateIntent.BucketName
			must(t, k8s.Delete(f.ctx, sb))

			// This manager did not see the CreateBucket answered: its deletion waits until
			// the create could no longer land (sentAt + 1s + call deadline + settle time),
			// which these timings keep well inside waitGone's minute.
			ctx, stop := context.WithCancel(f.ctx)
			done, err := startManager(ctx, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns,
				S3RequestTimeout: 10 * time.Second, CreateSettleTime: 5 * time.Second})
			must(t, err)
			defer func() { stop(); <-done }()
			f.waitGone(sb)
			if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
				t.Fatalf("bucket %s still exists after its claim (deletionPolicy Delete) is gone: %v", bucket, err)
			}

			again := f.bucket("first-pass", func(sb *bkv1.StorageBucket) {
				sb.Labels = map[string]string{isolatedLabel: f.ns}
				sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete
			})
			got := f.waitCondition(again, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			if got.Status.BucketName != bucket {
				t.Fatalf("the new claim has bucket %q, want %q", got.Status.BucketName, bucket)
			}
			// Only this manager sees the claim, so it must also finish its deletion:
			// the next interrupted manager must find no other claim to act on.
			must(t, k8s.Delete(f.ctx, got))
			f.waitGone(got)
		})
	}
}
