package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// runbookPage is the runbook TestLeavingMinIORunbook runs.
const runbookPage = "docs/leaving-minio.md"

// TestLeavingMinIORunbook runs every sh block of docs/leaving-minio.md, as written and in
// order, with bash in one working directory, as the platform engineer reading it would:
// a real kubectl (hack/peers' build, at the control plane's version) that finds the
// plugin on PATH as kubectl-bucketkeeper, against the suite's API server and operator, a
// MinIO holding the fleet, and a SeaweedFS as the successor; the page's variables name
// them. Between the blocks and at the end it checks what the page promises: every team
// bucket adopted and Ready with its objects unchanged, a bucket no rule maps left alone;
// the application's BucketAccess key writing its bucket on MinIO; after the retirement
// every claim Ready on the successor, named so in its spec, every object there, the
// application's Secret naming the successor with a key that reads its object, the
// Deployment reading that Secret, and the ObjectStore minio gone.
func TestLeavingMinIORunbook(t *testing.T) {
	started(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	mark := logs.Len()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator logs since the test started (tail):\n%s", testenv.Tail(logs.From(mark), 12000))
		}
	})
	minio, err := testenv.StartS3(testenv.MinIO)
	must(t, err)
	t.Cleanup(func() { _ = minio.Close() })
	next, err := testenv.StartS3(testenv.SeaweedFS)
	must(t, err)
	t.Cleanup(func() { _ = next.Close() })
	t.Cleanup(func() { cleanupRunbook(t) }) // before the stores stop

	// The cluster as the page finds it: the operator's namespace, the teams' and the
	// application, which reads no Secret of bucketkeeper's yet.
	for _, ns := range []string{"bucketkeeper-system", "team-a", "team-b"} {
		must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	labels := map[string]string{"app": "invoices"}
	must(t, k8s.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "invoices"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "invoices", Image: "registry.example/invoices:1"}}}}},
	}))

	// The fleet on MinIO, made by hand long ago: the teams' buckets, one versioned and
	// tagged, and a scratch bucket no namespace rule maps.
	onMinIO := adminOf(t, minio)
	fleet := map[string]map[string]string{
		"team-a-invoices": {"2026/01.pdf": "january", "2026/02.pdf": "february"},
		"team-a-uploads":  {"avatar.png": "png"},
		"team-b-logs":     {"app/1.log": "one", "app/2.log": "two"},
	}
	scratch := map[string]string{"notes.txt": "nobody's"}
	for bucket, objects := range fleet {
		must(t, onMinIO.CreateBucket(ctx, bucket, ""))
		putAll(t, ctx, onMinIO, bucket, objects)
	}
	must(t, onMinIO.PutBucketVersioning(ctx, "team-b-logs", s3.VersioningEnabled))
	must(t, onMinIO.PutBucketTagging(ctx, "team-b-logs", map[string]string{"cost-center": "cc-7"}))
	must(t, onMinIO.CreateBucket(ctx, "scratch", ""))
	putAll(t, ctx, onMinIO, "scratch", scratch)

	sh := runbookShell(t, map[string]string{
		"MINIO_ENDPOINT": minio.Endpoint, "MINIO_ACCESS_KEY": minio.AccessKeyID, "MINIO_SECRET_KEY": minio.SecretAccessKey,
		"SEAWEEDFS_ENDPOINT": next.Endpoint, "SEAWEEDFS_ACCESS_KEY": next.AccessKeyID, "SEAWEEDFS_SECRET_KEY": next.SecretAccessKey,
	})
	blocks := runbookBlocks(t)
	checked := map[string]bool{}
	// What the page promises once a block that holds the key has run.
	checks := map[string]func(){
		"kubectl bucketkeeper adopt objectstore/minio": func() {
			for bucket, objects := range fleet {
				ns := bucket[:strings.LastIndex(bucket, "-")]
				sb := &bkv1.StorageBucket{}
				must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: bucket}, sb))
				if c := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionProvisioned); c == nil || c.Reason != bkv1.ReasonBucketAdopted || sb.Status.BucketName != bucket {
					t.Errorf("claim %s/%s: bucket %q, conditions %s", ns, bucket, sb.Status.BucketName, testenv.DescribeConditions(sb.Status.Conditions))
				}
				sameObjects(t, ctx, onMinIO, bucket, objects, "on MinIO once adopted")
			}
			if _, err := os.Stat(filepath.Join(sh.dir, "adopted", "team-b", "team-b-logs.yaml")); err != nil {
				t.Errorf("adopt's manifest of team-b-logs: %v", err)
			}
			if tags, err := onMinIO.GetBucketTagging(ctx, "scratch"); err != nil || len(tags) != 0 {
				t.Errorf("the bucket no rule maps: tags %v, %v; want it left alone", tags, err)
			}
		},
		"--from=secret/invoices-s3": func() {
			app := appKey(t, ctx, "team-a", "invoices-s3")
			if app.endpoint != minio.Endpoint {
				t.Fatalf("the application's Secret names %s, want MinIO (%s)", app.endpoint, minio.Endpoint)
			}
			must(t, app.c.PutObject(ctx, "team-a-invoices", "2026/03.pdf", []byte("march")))
			fleet["team-a-invoices"]["2026/03.pdf"] = "march"
			if _, err := app.c.GetObject(ctx, "team-a-uploads", "avatar.png", 16); err == nil {
				t.Errorf("the application's key reads team-a-uploads, which it was not granted")
			}
			dep := &appsv1.Deployment{}
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "invoices"}, dep))
			if !readsSecret(dep, "invoices-s3", bkv1.AccessSecretKeyAccessKeyID) {
				t.Errorf("the Deployment does not read its key from Secret invoices-s3: %+v", dep.Spec.Template.Spec.Containers[0].Env)
			}
		},
	}
	for i, b := range blocks {
		r := sh.run(ctx, b)
		t.Logf("block %d:\n%s\n%s", i+1, b, r)
		if r.code != 0 {
			t.Fatalf("%s's block %d failed:\n%s\n%s", runbookPage, i+1, b, r)
		}
		for key, check := range checks {
			if strings.Contains(b, key) && !checked[key] {
				checked[key] = true
				check()
			}
		}
	}
	for key := range checks {
		if !checked[key] {
			t.Errorf("%s has no block running %q, whose result the test checks", runbookPage, key)
		}
	}

	// The end: every claim on the successor, Ready, named so in Git; MinIO's ObjectStore gone.
	onNext := adminOf(t, next)
	for bucket, objects := range fleet {
		ns := bucket[:strings.LastIndex(bucket, "-")]
		sb := &bkv1.StorageBucket{}
		must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: bucket}, sb))
		ready := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionReady)
		if sb.Spec.ObjectStoreRef.Name != "seaweedfs" || sb.Status.ObjectStore != "seaweedfs" || ready == nil || ready.Status != metav1.ConditionTrue {
			t.Errorf("claim %s/%s: spec names %q, lives on %q, conditions %s", ns, bucket, sb.Spec.ObjectStoreRef.Name, sb.Status.ObjectStore, testenv.DescribeConditions(sb.Status.Conditions))
		}
		sameObjects(t, ctx, onNext, bucket, objects, "on the successor")
	}
	app := appKey(t, ctx, "team-a", "invoices-s3")
	if app.endpoint != next.Endpoint {
		t.Errorf("the application's Secret names %s, want the successor (%s)", app.endpoint, next.Endpoint)
	} else if body, err := app.c.GetObject(ctx, "team-a-invoices", "2026/03.pdf", 16); err != nil || string(body) != "march" {
		t.Errorf("the application's key on the successor: %q, %v", body, err)
	}
	dep := &appsv1.Deployment{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "invoices"}, dep))
	if !readsSecret(dep, "invoices-s3", bkv1.AccessSecretKeyAccessKeyID) || ptr.Deref(dep.Spec.Replicas, 0) != 1 {
		t.Errorf("the Deployment after the move: replicas %d, env %+v", ptr.Deref(dep.Spec.Replicas, 0), dep.Spec.Template.Spec.Containers[0].Env)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "minio"}, &bkv1.ObjectStore{}); !apierrors.IsNotFound(err) {
		t.Errorf("ObjectStore minio after the clean-up: %v, want it gone", err)
	}
	sameObjects(t, ctx, onMinIO, "scratch", scratch, "on MinIO, no claim's")
}

// runbookBlocks returns the bodies of the page's sh blocks, in order.
func runbookBlocks(t *testing.T) []string {
	t.Helper()
	root, err := testenv.RepoRoot()
	must(t, err)
	data, err := os.ReadFile(filepath.Join(root, runbookPage))
	must(t, err)
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && line == "```sh":
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if len(blocks) == 0 || cur != nil {
		t.Fatalf("%s: %d sh blocks, one unterminated: %v", runbookPage, len(blocks), cur != nil)
	}
	return blocks
}

// shell runs blocks with bash in one working directory, with kubectl and the plugin
// first on PATH and the page's variables set.
type shell struct {
	dir string
	env []string
}

func runbookShell(t *testing.T, vars map[string]string) *shell {
	t.Helper()
	kubectl, err := localpeers.Binary("kubectl")
	must(t, err)
	self, err := os.Executable()
	must(t, err)
	root := t.TempDir()
	bin, home, dir := filepath.Join(root, "bin"), filepath.Join(root, "home"), filepath.Join(root, "gitops")
	for _, d := range []string{bin, home, dir} {
		must(t, os.MkdirAll(d, 0o700))
	}
	must(t, os.Symlink(kubectl, filepath.Join(bin, "kubectl")))
	// kubectl runs a plugin it finds on PATH with the arguments after its name.
	plugin := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q bucketkeeper \"$@\"\n", asKubectlEnv, self)
	must(t, os.WriteFile(filepath.Join(bin, "kubectl-bucketkeeper"), []byte(plugin), 0o700))
	env := []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "KUBECONFIG=" + kubeconfig}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return &shell{dir: dir, env: env}
}

func (s *shell) run(ctx context.Context, block string) result {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", block)
	cmd.Dir, cmd.Env = s.dir, s.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		code = -1
		errOut.WriteString(err.Error())
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// adminOf is a client of srv with its admin's key.
func adminOf(t *testing.T, srv *testenv.S3Server) s3.Client {
	t.Helper()
	c, err := s3.New(context.Background(), s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey, RequestTimeout: 30 * time.Second})
	must(t, err)
	return c
}

func putAll(t *testing.T, ctx context.Context, c s3.Client, bucket string, objects map[string]string) {
	t.Helper()
	for key, body := range objects {
		must(t, c.PutObject(ctx, bucket, key, []byte(body)))
	}
}

// sameObjects fails the test unless bucket holds exactly objects (current versions).
func sameObjects(t *testing.T, ctx context.Context, c s3.Client, bucket string, objects map[string]string, where string) {
	t.Helper()
	page, err := c.ListObjectVersions(ctx, bucket, nil)
	if err != nil {
		t.Errorf("%s %s: %v", bucket, where, err)
		return
	}
	got := map[string]string{}
	for _, v := range page.Versions {
		if v.IsDeleteMarker || (v.VersionID != "" && !v.IsLatest) {
			continue
		}
		body, err := c.GetObject(ctx, bucket, v.Key, 1<<10)
		if err != nil {
			t.Errorf("%s/%s %s: %v", bucket, v.Key, where, err)
		}
		got[v.Key] = string(body)
	}
	if !maps.Equal(got, objects) {
		t.Errorf("%s %s holds %v, want %v", bucket, where, got, objects)
	}
}

// appClient is what an application reading a BucketAccess's Secret gets.
type appClient struct {
	c        s3.Client
	endpoint string
}

func appKey(t *testing.T, ctx context.Context, namespace, name string) appClient {
	t.Helper()
	sec := &corev1.Secret{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sec))
	endpoint := string(sec.Data[bkv1.AccessSecretKeyEndpoint])
	c, err := s3.New(ctx, s3.Config{Endpoint: endpoint, Region: string(sec.Data[bkv1.AccessSecretKeyRegion]), ForcePathStyle: true,
		AccessKeyID: string(sec.Data[bkv1.AccessSecretKeyAccessKeyID]), SecretAccessKey: string(sec.Data[bkv1.AccessSecretKeySecretKey]),
		RequestTimeout: 30 * time.Second})
	must(t, err)
	return appClient{c: c, endpoint: endpoint}
}

// readsSecret says whether dep's first container takes key from Secret name.
func readsSecret(dep *appsv1.Deployment, name, key string) bool {
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if r := e.ValueFrom; e.Name == key && r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Name == name && r.SecretKeyRef.Key == key {
			return true
		}
	}
	return false
}

// cleanupRunbook abandons the teams' claims (Orphan) and accesses, then the stores.
func cleanupRunbook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{"team-a", "team-b"} {
		(&fixture{t: t, ctx: ctx, ns: ns}).cleanupClaims()
	}
	for _, name := range []string{"minio", "seaweedfs"} {
		_ = k8s.Delete(ctx, &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	err := testenv.Poll(ctx, func() error {
		list := &bkv1.ObjectStoreList{}
		if err := k8s.List(ctx, list); err != nil {
			return err
		}
		for _, s := range list.Items {
			if s.Name == "minio" || s.Name == "seaweedfs" {
				return fmt.Errorf("ObjectStore %s still there", s.Name)
			}
		}
		return nil
	})
	if err != nil && !t.Failed() {
		t.Errorf("clean-up: %v", err)
	}
}
