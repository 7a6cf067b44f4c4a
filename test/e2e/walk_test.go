package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// A walk applies what a reader is told to apply (the samples of config/samples, the
// YAML of a page) to a cluster of its own, a fresh control plane with the operator
// running against the suite's real stores, the way `kubectl apply --server-side` would,
// and waits for every object to be Current by kstatus, as `kubectl wait` and GitOps
// health checks read it. The only changes to what the reader sees are the
// placeholders a reader replaces too (the store's endpoint, its keys), each of which
// must appear in the text, so the test and the text cannot drift apart.
type walk struct {
	t   *testing.T
	ctx context.Context
	cfg *rest.Config
	c   client.Client
	// applied is every object applied, in order, for the clean-up.
	applied []*unstructured.Unstructured
	// stores are the admin clients of the stores the walk's buckets are on, by
	// ObjectStore name, to remove what a Retain claim leaves.
	stores map[string]s3.Client
}

// newWalk starts a control plane and the operator on it (opts, at their defaults
// otherwise). The operator runs until the walk's clean-up has deleted what was applied.
func newWalk(t *testing.T, opts operator.Options) *walk {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	cp, err := testenv.StartControlPlane()
	must(t, err)
	t.Cleanup(func() { stop("the walk's control plane", cp.Stop) })
	c, err := client.New(cp.Config, client.Options{Scheme: operator.Scheme()})
	must(t, err)
	w := &walk{t: t, ctx: ctx, cfg: cp.Config, c: c, stores: map[string]s3.Client{}}
	startManager(t, cp.Config, opts)
	t.Cleanup(w.cleanup) // before the manager stops: cleanups run last-in first-out
	must(t, ignoreExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bucketkeeper-system"}})))
	return w
}

// startControllerManager runs kube-controller-manager (the real one, from the test
// peers) with only the named controllers against the API server cfg reaches, until
// the test ends: the test control planes run none, and some of what a page says needs
// one (a ResourceQuota's usage, the aggregation of ClusterRoles).
func startControllerManager(t *testing.T, cfg *rest.Config, controllers ...string) {
	t.Helper()
	bin, err := localpeers.BinDir("kube-node")
	must(t, err)
	dir := t.TempDir()
	kubeconfig, logPath := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "kube-controller-manager.log")
	must(t, testenv.WriteKubeconfig(kubeconfig, "envtest", "default", cfg))
	p, err := testenv.StartProcess(filepath.Join(bin, "kube-node"), []string{"kube-controller-manager",
		"--kubeconfig=" + kubeconfig, "--controllers=" + strings.Join(controllers, ","), "--leader-elect=false", "--secure-port=0"},
		nil, dir, logPath)
	must(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager log:\n%s", testenv.Tail(localpeers.LogTail(logPath), 4000))
		}
		_ = p.Stop()
	})
}

// store records the admin client of srv for the ObjectStore name.
func (w *walk) store(name string, srv *testenv.S3Server) {
	c, err := s3.New(w.ctx, s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey})
	must(w.t, err)
	w.stores[name] = c
}

// substitute replaces each placeholder of text by its value, failing when one does not
// appear: the text changed, and the test must follow.
func substitute(t *testing.T, where, text string, values map[string]string) string {
	t.Helper()
	for placeholder, value := range values {
		if !strings.Contains(text, placeholder) {
			t.Fatalf("%s no longer holds %q, which the test replaces with the test store's value", where, placeholder)
		}
		text = strings.ReplaceAll(text, placeholder, value)
	}
	return text
}

// decodeObjects reads every object of a YAML stream.
func decodeObjects(t *testing.T, where, text string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(text)), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("%s: %v", where, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// readSamples reads every object of config/samples/*.yaml, the placeholders replaced.
func readSamples(t *testing.T, values map[string]string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.RepoRoot()
	must(t, err)
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	must(t, err)
	var all strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		all.WriteString("\n---\n" + string(data))
	}
	return decodeObjects(t, "config/samples", substitute(t, "config/samples", all.String(), values))
}

// kindOrder is the order a reader applies kinds in: what others name first.
var kindOrder = []string{"Namespace", "Secret", "ServiceAccount", "ObjectStore", "StorageBucket", "BucketAccess"}

func kindRank(kind string) int {
	if i := slices.Index(kindOrder, kind); i >= 0 {
		return i
	}
	return len(kindOrder)
}

// apply applies objs server-side, ObjectStores and Secrets before the claims that name
// them.
func (w *walk) apply(objs []*unstructured.Unstructured) {
	w.t.Helper()
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return kindRank(a.GetKind()) - kindRank(b.GetKind()) })
	for _, o := range objs {
		// A namespace's ResourceQuota refuses what it counts until its controller has
		// counted: the refusal a reader's kubectl gets for a moment, and retries.
		var refused error
		err := pollFor(w, 30*time.Second, func() error {
			err := w.c.Patch(w.ctx, o.DeepCopy(), client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership)
			if err != nil && !strings.Contains(err.Error(), "status unknown for quota") {
				refused = err // not worth a retry
				return nil
			}
			return err
		})
		if refused != nil {
			err = refused
		}
		if err != nil {
			w.t.Fatalf("apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		w.applied = append(w.applied, o)
	}
}

// noNode are the kinds that need a node to become Current (Pods run): this control
// plane has none, so they are applied, and the API server's acceptance is what is
// checked of them.
var noNode = []string{"Deployment", "Job", "Pod", "StatefulSet", "DaemonSet"}

// waitCurrent waits until every object of objs is Current by kstatus, but those that
// need a node.
func (w *walk) waitCurrent(objs []*unstructured.Unstructured, timeout time.Duration) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	for _, o := range objs {
		if slices.Contains(noNode, o.GetKind()) {
			continue
		}
		var last *status.Result
		failed := errors.New("kstatus says a person must act")
		err := testenv.Poll(ctx, func() error {
			if last != nil && last.Status == status.FailedStatus {
				return nil // a person must act: no use waiting (reported below)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(o.GroupVersionKind())
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
				return err
			}
			res, err := status.Compute(got)
			if err != nil {
				return err
			}
			last = res
			if res.Status != status.CurrentStatus {
				return fmt.Errorf("%s: %s", res.Status, res.Message)
			}
			// kstatus reads an object the operator has not written a status for yet
			// as Current: one of ours is only once it has said Ready for its spec.
			if got.GroupVersionKind().Group == bkv1.GroupVersion.Group {
				gen, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
				conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
				ready := false
				for _, c := range conds {
					if m, ok := c.(map[string]any); ok && m["type"] == bkv1.ConditionReady && m["status"] == "True" {
						ready = true
					}
				}
				if !ready || gen != got.GetGeneration() {
					return fmt.Errorf("not yet Ready for generation %d (observed %d)", got.GetGeneration(), gen)
				}
			}
			return nil
		})
		if last != nil && last.Status == status.FailedStatus {
			err = failed
		}
		if err != nil {
			w.t.Fatalf("%s %s/%s is not Current: %v: %s", o.GetKind(), o.GetNamespace(), o.GetName(), err, resultText(last))
		}
	}
}

// pollFor polls cond until it returns nil or timeout passes.
func pollFor(w *walk, timeout time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	return testenv.Poll(ctx, cond)
}

func resultText(r *status.Result) string {
	if r == nil {
		return "never read"
	}
	return fmt.Sprintf("%s: %s", r.Status, r.Message)
}

// storageBucket reads a StorageBucket of the walk's cluster.
func (w *walk) storageBucket(namespace, name string) *bkv1.StorageBucket {
	w.t.Helper()
	sb := &bkv1.StorageBucket{}
	must(w.t, w.c.Get(w.ctx, client.ObjectKey{Namespace: namespace, Name: name}, sb))
	return sb
}

// secret reads a Secret of the walk's cluster, waiting for it: an implicit
// BucketAccess (spec.access) is made by its claim, so the claim's Ready comes before
// the access's key is in its Secret, and no object of the walk waits for that access.
func (w *walk) secret(namespace, name string) map[string][]byte {
	w.t.Helper()
	s := &corev1.Secret{}
	must(w.t, pollFor(w, 2*time.Minute, func() error {
		return w.c.Get(w.ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)
	}))
	return s.Data
}

// keyClient is an S3 client from an access Secret's keys alone, as an application
// builds it.
func (w *walk) keyClient(data map[string][]byte) s3.Client {
	w.t.Helper()
	c, err := s3.New(w.ctx, s3.Config{
		Endpoint: string(data[bkv1.AccessSecretKeyEndpoint]), Region: string(data[bkv1.AccessSecretKeyRegion]),
		ForcePathStyle: string(data[bkv1.SecretKeyForcePathStyle]) == "true",
		AccessKeyID:    string(data[bkv1.AccessSecretKeyAccessKeyID]), SecretAccessKey: string(data[bkv1.AccessSecretKeySecretKey]),
		RequestTimeout: 10 * time.Second,
	})
	must(w.t, err)
	return c
}

// cleanup deletes what the walk applied, claims and accesses first while the operator
// runs (their deletion policies and revocations carried out), then removes the buckets
// Retain claims left on the stores, so the suite's stores hold nothing of the walk's.
func (w *walk) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	report := w.t.Errorf
	if w.t.Failed() {
		report = w.t.Logf
	}
	retained := map[string][]string{}
	for _, kind := range []string{"BucketAccess", "StorageBucket", "ObjectStore"} {
		var gone []*unstructured.Unstructured
		for _, o := range w.applied {
			if o.GetKind() != kind {
				continue
			}
			if kind == "StorageBucket" {
				sb := &bkv1.StorageBucket{}
				if w.c.Get(ctx, client.ObjectKeyFromObject(o), sb) == nil && sb.Status.BucketName != "" && sb.Spec.DeletionPolicy == bkv1.DeletionPolicyRetain {
					retained[sb.HomeStore()] = append(retained[sb.HomeStore()], sb.Status.BucketName)
				}
			}
			if err := w.c.Delete(ctx, o.DeepCopy()); client.IgnoreNotFound(err) != nil {
				report("delete %s %s: %v", kind, o.GetName(), err)
			}
			gone = append(gone, o)
		}
		for _, o := range gone {
			err := testenv.Poll(ctx, func() error {
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(o.GroupVersionKind())
				err := w.c.Get(ctx, client.ObjectKeyFromObject(o), got)
				if err == nil {
					return fmt.Errorf("still there")
				}
				return client.IgnoreNotFound(err)
			})
			if err != nil {
				report("%s %s/%s not deleted: %v", kind, o.GetNamespace(), o.GetName(), err)
			}
		}
	}
	for store, buckets := range retained {
		admin := w.stores[store]
		for _, b := range buckets {
			if admin == nil {
				report("bucket %s of store %s retained, and no admin client to remove it", b, store)
				continue
			}
			if err := emptyAndDelete(ctx, admin, b); err != nil && s3.KindOf(err) != s3.KindNotFound {
				report("remove retained bucket %s: %v", b, err)
			}
		}
	}
}

// emptyAndDelete deletes every version of bucket, then the bucket.
func emptyAndDelete(ctx context.Context, c s3.Client, bucket string) error {
	var page *s3.PageToken
	for {
		p, err := c.ListObjectVersions(ctx, bucket, page)
		if err != nil {
			return err
		}
		ids := make([]s3.ObjectID, 0, len(p.Versions))
		for _, v := range p.Versions {
			ids = append(ids, s3.ObjectID{Key: v.Key, VersionID: v.VersionID})
		}
		if len(ids) > 0 {
			if err := c.DeleteObjects(ctx, bucket, ids); err != nil {
				return err
			}
		}
		if p.Next == nil {
			return c.DeleteBucket(ctx, bucket)
		}
		page = p.Next
	}
}

// isDenied says whether err is the store refusing a key what it may not do.
func isDenied(err error) bool { return s3.KindOf(err) == s3.KindAccessDenied }
