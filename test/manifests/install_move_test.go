package manifests

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// move moves a bucket of the test's SeaweedFS to Ceph RGW (the store "rgw" the keyless
// step made) as the chart installs the operator: each pass an Indexed Job of mover
// pods in the release namespace. A mover pod of the first copy pass is killed while it
// copies; the Job replaces it, and the move ends Done with every object equal on RGW
// and every write an application made meanwhile (retrying what the cutover refuses,
// following the connection Secret) there: 0 lost. The mover pods ran as non-root on a
// read-only root with the chart's limits.
func (in *installer) move(rgw *testenv.S3Server) {
	in.t.Helper()
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "archive"}, Spec: bkv1.StorageBucketSpec{
		ObjectStoreRef: bkv1.ObjectStoreReference{Name: "seaweedfs"}, DeletionPolicy: bkv1.DeletionPolicyRetain}}
	in.create(sb)
	in.bucketStays(sb, "before its move")
	if err := in.c.Get(in.ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
		in.t.Fatal(err)
	}
	bucket := sb.Status.BucketName
	src := in.store.Client()
	sums := map[string][32]byte{}
	put := func(key string, size int) {
		body := bytes.Repeat([]byte(key), size/len(key)+1)[:size]
		if _, err := src.PutObject(in.ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(body)}); err != nil {
			in.t.Fatal(err)
		}
		sums[key] = sha256.Sum256(body)
	}
	for i := range 200 {
		put(fmt.Sprintf("small/%03d", i), 16<<10)
	}
	for i := range 8 {
		put(fmt.Sprintf("large/%d", i), 24<<20)
	}

	w := &secretWriter{in: in, secret: sb.Name + "-bucket", stores: map[string]*s3.Client{}}
	for name, srv := range map[string]*testenv.S3Server{"seaweedfs": in.store, "rgw": rgw} {
		store := &bkv1.ObjectStore{}
		if err := in.c.Get(in.ctx, client.ObjectKey{Name: name}, store); err != nil {
			in.t.Fatal(err)
		}
		w.stores[store.Spec.Endpoint] = srv.Client()
	}
	w.start()
	defer w.stop()

	patch := client.MergeFrom(sb.DeepCopy())
	sb.Spec.Move = &bkv1.MoveSpec{}
	sb.Spec.ObjectStoreRef.Name = "rgw"
	if err := in.c.Patch(in.ctx, sb, patch); err != nil {
		in.t.Fatal(err)
	}
	// A mover pod of the first copy pass (pass 2), killed while it runs.
	var killed string
	in.eventually(3*time.Minute, "a running mover pod of the copy pass", func() error {
		if err := in.c.Get(in.ctx, client.ObjectKeyFromObject(sb), sb); err != nil || sb.Status.Move == nil {
			return fmt.Errorf("no move yet (%v)", err)
		}
		pods := &corev1.PodList{}
		if err := in.c.List(in.ctx, pods, client.InNamespace(namespace), client.MatchingLabels{
			bkv1.LabelMoveJob: sb.Status.Move.ID, "batch.kubernetes.io/job-name": bkv1.MoveCheckpointPrefix + sb.Status.Move.ID + "-p2"}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				killed = p.Name
				return in.c.Delete(in.ctx, &p, client.GracePeriodSeconds(0))
			}
		}
		return fmt.Errorf("%d pods, none running; move %+v", len(pods.Items), sb.Status.Move)
	})
	in.t.Logf("killed mover pod %s mid-copy", killed)

	job := &batchv1.Job{}
	if err := in.c.Get(in.ctx, client.ObjectKey{Namespace: namespace, Name: bkv1.MoveCheckpointPrefix + sb.Status.Move.ID + "-p2"}, job); err != nil {
		in.t.Fatal(err)
	}
	if job.Spec.Completions == nil || *job.Spec.Completions < 2 || ptr.Deref(job.Spec.CompletionMode, "") != batchv1.IndexedCompletion {
		in.t.Errorf("the copy pass's Job: %d completions, mode %v; want an Indexed Job of at least 2 shards", ptr.Deref(job.Spec.Completions, 0), job.Spec.CompletionMode)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if !ptr.Deref(pod.SecurityContext.RunAsNonRoot, false) || ptr.Deref(pod.SecurityContext.RunAsUser, 0) == 0 ||
		!ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) || c.Resources.Limits.Memory().String() != "128Mi" || c.Resources.Limits.Cpu().String() != "1" {
		in.t.Errorf("mover pods: security %+v / %+v, limits %v; want non-root, a read-only root and the chart's limits", pod.SecurityContext, c.SecurityContext, c.Resources.Limits)
	}

	in.eventually(6*time.Minute, "the move Done", func() error {
		if err := in.c.Get(in.ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		if m := sb.Status.Move; m == nil || m.Phase != bkv1.MoveDone {
			return fmt.Errorf("move %+v", m)
		}
		return nil
	})
	in.t.Logf("moved: %d objects, %d bytes, write pause %s", sb.Status.Move.CopiedObjects, sb.Status.Move.CopiedBytes, sb.Status.Move.WritePause.Duration)
	w.waitAcksAfter(5, sb.Status.Move.SwitchedAt.Time)
	acked := w.stop()

	dst := rgw.Client()
	for key, sum := range sums {
		if got, err := readAll(in, dst, bucket, key); err != nil || sha256.Sum256(got) != sum {
			in.t.Errorf("object %s on RGW after the move: %v", key, err)
		}
	}
	lost := 0
	for key, want := range acked {
		got, err := readAll(in, dst, bucket, key)
		if err != nil || string(got) != want {
			lost++
			in.t.Errorf("acknowledged write of %s lost: want %q, got %q (%v)", key, want, got, err)
		}
	}
	in.t.Logf("%d writes acknowledged through the connection Secret during the move, %d lost", w.acks.Load(), lost)
}

func readAll(in *installer, c *s3.Client, bucket, key string) ([]byte, error) {
	out, err := c.GetObject(in.ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// secretWriter is an application writing to the bucket its connection Secret names,
// with the store's key (the stores hand no per-application keys here), retrying every
// request until it is acknowledged and reading the Secret again after each failure.
type secretWriter struct {
	in     *installer
	secret string
	stores map[string]*s3.Client // by the endpoint the Secret names

	stopping atomic.Bool
	done     chan struct{}
	acks     atomic.Int64
	mu       sync.Mutex
	last     map[string]string
	at       []time.Time
}

func (w *secretWriter) start() {
	w.done, w.last = make(chan struct{}), map[string]string{}
	go func() {
		defer close(w.done)
		for i := 0; !w.stopping.Load(); i++ {
			key := fmt.Sprintf("live/%02d", i%20)
			body := fmt.Sprintf("%s@%d", key, i)
			for w.in.ctx.Err() == nil {
				c, bucket := w.target()
				if c != nil {
					_, err := c.PutObject(w.in.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
					if err == nil {
						w.mu.Lock()
						w.last[key], w.at = body, append(w.at, time.Now())
						w.mu.Unlock()
						w.acks.Add(1)
						break
					}
				}
				time.Sleep(100 * time.Millisecond) // an application's retry backoff
			}
		}
	}()
}

// target is the client of the store the Secret names, and the bucket.
func (w *secretWriter) target() (*s3.Client, string) {
	secret := &corev1.Secret{}
	if err := w.in.c.Get(w.in.ctx, client.ObjectKey{Namespace: "apps", Name: w.secret}, secret); err != nil {
		return nil, ""
	}
	return w.stores[string(secret.Data[bkv1.SecretKeyAWSEndpointS3])], string(secret.Data[bkv1.SecretKeyBucketName])
}

func (w *secretWriter) waitAcksAfter(n int, since time.Time) {
	w.in.eventually(2*time.Minute, fmt.Sprintf("%d writes acknowledged after the switch", n), func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		got := 0
		for _, at := range w.at {
			if at.After(since) {
				got++
			}
		}
		if got < n {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
}

// stop ends the writer between requests and returns each key's last acknowledged
// content.
func (w *secretWriter) stop() map[string]string {
	w.stopping.Store(true)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]string{}
	for k, v := range w.last {
		out[k] = v
	}
	return out
}
