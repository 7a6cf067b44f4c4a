package main

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

type floorResult struct {
	Seconds float64
	// CPUSeconds is the harness process's CPU time while the floor ran: the floor's
	// loop, its clients and nothing else of note.
	CPUSeconds float64
	API        map[string]float64
	APITotal   float64
	S3         map[string]float64
}

// floor is the least any operator could do for N buckets: a plain loop making, per
// bucket and at the same concurrency, the same S3 calls (check, create, tag, read and
// apply the configuration) and the same Kubernetes writes (create the object, add the
// finalizer, write the connection Secret and the Ready status) — no queue, no cache, no
// watch, no retries.
func (e *env) floor(ns string, n int) (*floorResult, error) {
	if err := e.newNamespace(ns); err != nil {
		return nil, err
	}
	counter := newRequestCounter()
	cfg := rest.CopyConfig(e.cfg)
	cfg.Wrap(counter.wrap)
	k8s, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	s3Counts := map[string]float64{}
	c, err := s3.New(e.ctx, s3.Config{Endpoint: e.s3.Endpoint, Region: e.s3.Region, ForcePathStyle: true,
		AccessKeyID: e.s3.AccessKeyID, SecretAccessKey: e.s3.SecretAccessKey,
		Observer: func(op string, _ int, _ error) { mu.Lock(); s3Counts[op]++; mu.Unlock() }})
	if err != nil {
		return nil, err
	}

	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	cpu0 := processCPUSeconds()
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := e.floorOne(k8s, c, ns, i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPUSeconds() - cpu0
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	api := counter.snapshot()
	total := 0.0
	for _, v := range api {
		total += v
	}
	return &floorResult{Seconds: elapsed.Seconds(), CPUSeconds: cpu, API: api, APITotal: total, S3: s3Counts}, nil
}

func (e *env) floorOne(k8s client.Client, c s3.Client, ns string, i int) error {
	ctx := e.ctx
	bucket := fmt.Sprintf("%s-%05d", ns, i)
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bucket, Labels: map[string]string{"bench": "floor"}},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: storeName}, Tags: map[string]string{"bench": "floor"}}}
	if err := k8s.Create(ctx, sb); err != nil {
		return err
	}
	patch := client.MergeFrom(sb.DeepCopy())
	controllerutil.AddFinalizer(sb, bkv1.Finalizer)
	if err := k8s.Patch(ctx, sb, patch); err != nil {
		return err
	}

	if _, err := c.HeadBucket(ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		return fmt.Errorf("head %s: %v", bucket, err)
	}
	if err := c.CreateBucket(ctx, bucket, ""); err != nil {
		return err
	}
	tags := map[string]string{"bench": "floor", bkv1.TagClaim: ns + "/" + bucket, bkv1.TagUID: string(sb.UID)}
	if err := c.PutBucketTagging(ctx, bucket, tags); err != nil {
		return err
	}
	if _, err := c.GetBucketTagging(ctx, bucket); err != nil {
		return err
	}
	if _, err := c.GetBucketLifecycle(ctx, bucket); err != nil {
		return err
	}
	if _, err := c.GetPublicAccessBlock(ctx, bucket); err != nil {
		return err
	}
	if err := c.PutPublicAccessBlock(ctx, bucket, s3.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}); err != nil {
		return err
	}
	if _, err := c.GetBucketPolicy(ctx, bucket); err != nil {
		return err
	}
	if _, err := c.GetBucketCors(ctx, bucket); err != nil {
		return err
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bucket + "-bucket"},
		StringData: map[string]string{"BUCKET_NAME": bucket, "AWS_ENDPOINT_URL_S3": e.s3.Endpoint}}
	if err := k8s.Create(ctx, secret); err != nil {
		return err
	}
	statusPatch := client.MergeFrom(sb.DeepCopy())
	sb.Status.BucketName = bucket
	apimeta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady, Message: "floor", ObservedGeneration: sb.Generation})
	return k8s.Status().Patch(ctx, sb, statusPatch)
}

// processCPUSeconds is this process's user+system CPU time so far.
func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
