package integration_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
)

// TestWatchNamespaceReadsCredentialsElsewhere: a manager limited to one namespace
// (--watch-namespace) still reads the credentials Secret of a store that lives in
// another namespace (platform teams keep them in their own), so the store is usable
// and a StorageBucket in the watched namespace becomes Ready through that manager.
func TestWatchNamespaceReadsCredentialsElsewhere(t *testing.T) {
	ctx := context.Background()
	credsNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "platform-creds-"}}
	must(t, k8s.Create(ctx, credsNS))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), credsNS) })
	must(t, k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: credsNS.Name, Name: "store-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: seaweed.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: seaweed.SecretAccessKey},
	}))
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.CredentialsSecretRef = &bkv1.SecretReference{Namespace: credsNS.Name, Name: "store-credentials"}
	})

	own := &requestLog{}
	mctx, stop := context.WithCancel(f.ctx)
	done, err := startManager(mctx, operator.Options{WatchNamespace: f.ns, WatchLabelSelector: isolatedLabel + "=" + f.ns, S3Observer: own.observe})
	must(t, err)
	t.Cleanup(func() { stop(); <-done })

	sb := f.bucket("scoped", func(sb *bkv1.StorageBucket) { sb.Labels = map[string]string{isolatedLabel: f.ns} })
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if n := own.snapshot(f.store)["CreateBucket"]; n != 1 {
		t.Errorf("the namespaced manager made %d CreateBucket calls on the store, want 1 (ops: %v)", n, own.snapshot(f.store))
	}
	if n := requests.snapshot(f.store)["CreateBucket"]; n != 0 {
		t.Errorf("the suite's manager created the isolated bucket (%d calls)", n)
	}
	if log := logs.String(); strings.Contains(log, "unknown namespace") {
		t.Error("a manager could not read from its cache: unknown namespace")
	}
}
