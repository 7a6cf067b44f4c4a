package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// startUpload begins a multipart upload and never completes it, as a crashed client
// would: the operator itself never starts one, so the SDK does it here.
func startUpload(ctx context.Context, t *testing.T, server *testenv.S3Server, bucket, key string) {
	t.Helper()
	api := awss3.New(awss3.Options{
		Region: server.Region, BaseEndpoint: aws.String(server.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(server.AccessKeyID, server.SecretAccessKey, ""),
		HTTPClient:  &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second},
	})
	_, err := api.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	must(t, err)
}

// TestPurgeReportsProgressEveryTenSeconds drives a Purge pass by pass with a fake
// clock: the first pass reports, a pass 5s later writes no status and sends no Event,
// the pass at 10s reports the totals (versions deleted, uploads aborted, passes). The
// incomplete upload is aborted and the bucket deleted. Objects are added between passes
// so that every pass has work, as a large bucket would.
func TestPurgeReportsProgressEveryTenSeconds(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) { purgeProgress(t, server) })
	}
}

func purgeProgress(t *testing.T, server *testenv.S3Server) {
	f := newFixture(t, server)
	clk := clocktesting.NewFakeClock(time.Now())
	recorder := events.NewFakeRecorder(100)
	statusWrites := 0
	wrapped := interceptor.NewClient(k8sWatch, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			statusWrites++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	stores := &stores.Registry{Client: k8s, APIReader: k8s, Factory: s3.New}
	r := &storagebucket.Reconciler{Client: wrapped, Recorder: recorder, Stores: stores, Clock: clk,
		SyncInterval: time.Hour, ClusterID: clusterID}
	// The suite's manager leaves this one to r alone.
	sb := f.bucket("purged", func(sb *bkv1.StorageBucket) {
		sb.Labels = map[string]string{isolatedLabel: f.ns}
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
	})
	req := ctrl.Request{NamespacedName: objKey(sb)}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(f.ctx, req); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
	for range 5 {
		reconcile()
		if c := findCond(f.get(sb), bkv1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
			break
		}
	}
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := got.Status.BucketName
	put := func(n int, prefix string) {
		for i := range n {
			must(t, f.admin.PutObject(f.ctx, bucket, fmt.Sprintf("%s-%d", prefix, i), []byte("x")))
		}
	}
	put(3, "first")
	startUpload(f.ctx, t, server, bucket, "half/uploaded")
	must(t, k8s.Delete(f.ctx, got))
	drain(recorder)

	pass := func(wantWrites int, wantEvents ...string) *bkv1.StorageBucket {
		t.Helper()
		before := statusWrites
		reconcile()
		if n := statusWrites - before; n != wantWrites {
			t.Errorf("pass at %s: %d status writes, want %d", clk.Now().Format(time.TimeOnly), n, wantWrites)
		}
		if got := drain(recorder); strings.Join(got, "|") != strings.Join(wantEvents, "|") {
			t.Errorf("pass at %s: events %q, want %q", clk.Now().Format(time.TimeOnly), got, wantEvents)
		}
		return f.get(sb)
	}
	cur := pass(1, "Normal Purging")
	msg := findCond(cur, bkv1.ConditionReady).Message
	if !strings.Contains(msg, "3 object versions deleted and 1 incomplete uploads aborted so far, in 1 passes") {
		t.Errorf("first report: %s", msg)
	}
	if strings.Contains(msg, "set") {
		t.Errorf("a Purge report must not tell to set anything: %s", msg)
	}
	uploads, err := f.admin.ListMultipartUploads(f.ctx, bucket, nil)
	must(t, err)
	if len(uploads.Uploads) != 0 {
		t.Errorf("uploads left after the first pass: %+v", uploads.Uploads)
	}

	put(2, "second")
	clk.Step(5 * time.Second)
	cur = pass(0)
	if findCond(cur, bkv1.ConditionReady).Message != msg {
		t.Errorf("the message changed inside the interval: %s", findCond(cur, bkv1.ConditionReady).Message)
	}

	put(1, "third")
	clk.Step(5 * time.Second)
	cur = pass(1, "Normal Purging")
	if msg := findCond(cur, bkv1.ConditionReady).Message; !strings.Contains(msg, "6 object versions deleted and 1 incomplete uploads aborted so far, in 3 passes") {
		t.Errorf("report at 10s: %s", msg)
	}

	// Nothing left: the next pass deletes the bucket and lets the object go.
	reconcile()
	f.waitGone(got)
	if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Fatalf("bucket still there after purge: %v", err)
	}
	if evs := drain(recorder); len(evs) != 1 || evs[0] != "Normal BucketDeleted" {
		t.Errorf("final events %q, want one BucketDeleted", evs)
	}
}

// drain returns the type and reason of every Event recorded so far.
func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			fields := strings.Fields(e)
			out = append(out, strings.Join(fields[:min(2, len(fields))], " "))
		default:
			return out
		}
	}
}
