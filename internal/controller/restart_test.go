package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// crashAfterCreate lets CreateBucket through and then hangs the first tagging call until
// the manager is stopped: the window in which a real crash leaves an untagged bucket.
type crashAfterCreate struct {
	s3.Client
	once    *sync.Once
	created chan struct{}
}

func (c crashAfterCreate) PutBucketTagging(ctx context.Context, bucket string, tags map[string]string) error {
	c.once.Do(func() { close(c.created) })
	<-ctx.Done()
	return ctx.Err()
}

// TestManagerStoppedMidCreate: a manager stopped between creating and tagging a bucket
// leaves an untagged bucket; the next manager must finish the job (one bucket, Ready)
// instead of refusing it as someone else's or creating a second one.
func TestManagerStoppedMidCreate(t *testing.T) {
	f := newFixture(t, seaweed)
	created := make(chan struct{})
	once := &sync.Once{}
	crashing := func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
		c, err := s3.New(ctx, cfg)
		return crashAfterCreate{Client: c, once: once, created: created}, err
	}
	ctx, stopFirst := context.WithCancel(f.ctx)
	defer stopFirst()
	firstDone, err := startManager(ctx, operator.Options{WatchLabelSelector: isolatedLabel, S3Factory: crashing})
	must(t, err)

	sb := f.bucket("interrupted", func(sb *bkv1.StorageBucket) { sb.Labels = map[string]string{isolatedLabel: "true"} })
	select {
	case <-created:
	case <-time.After(60 * time.Second):
		t.Fatal("the first manager never created the bucket")
	}
	stopFirst()
	<-firstDone

	cur := f.get(sb)
	bucket := cur.Annotations["bucketkeeper.io/created-bucket"]
	if bucket == "" {
		t.Fatal("the create intent was not recorded before CreateBucket")
	}
	if tags, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || len(tags) != 0 {
		t.Fatalf("setup: want an existing untagged bucket, got tags %v, %v", tags, err)
	}

	ctx2, stopSecond := context.WithCancel(f.ctx)
	secondDone, err := startManager(ctx2, operator.Options{WatchLabelSelector: isolatedLabel})
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
