package integration_test

import (
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestPacedEquivalentPolicyIsNotRewritten: a policy the store gives back in another form
// (its own reformatting, or an equivalent document written out of band: scalars for
// one-element arrays, "false" for false, other key order) is left alone on sync: no
// PutBucketPolicy and no ConfigApplied Event, neither from the running manager nor from
// a fresh reconciler that remembers nothing.
func TestPacedEquivalentPolicyIsNotRewritten(t *testing.T) {
	t.Parallel() // mostly waiting on intervals: see the package doc in suite_test.go
	// Each store accepts a different subset of the forms: SeaweedFS refuses a boolean
	// condition value and rewrites one-element arrays to scalars itself; Versity keeps
	// what it is given but refuses a Statement that is not a list.
	cases := []struct {
		name   string
		server *testenv.S3Server
		// spec is the policy as a user writes it; equivalent is the same policy as
		// another tool writes it out of band. %[1]s is the bucket.
		spec, equivalent string
	}{
		{"seaweedfs", seaweed,
			`{"Version":"2012-10-17","Statement":[{"Sid":"DenyProtected","Effect":"Deny",` +
				`"Principal":{"AWS":["*"]},"Action":["s3:DeleteObject"],"Resource":["arn:aws:s3:::%[1]s/protected/*"],` +
				`"Condition":{"Bool":{"aws:SecureTransport":["false"]}}}]}`,
			`{"Statement":{"Condition":{"Bool":{"aws:SecureTransport":"false"}},` +
				`"Resource":"arn:aws:s3:::%[1]s/protected/*","Action":"s3:DeleteObject","Principal":{"AWS":"*"},` +
				`"Effect":"Deny","Sid":"DenyProtected"},"Version":"2012-10-17"}`},
		{"versity", versity,
			`{"Version":"2012-10-17","Statement":[{"Sid":"DenyProtected","Effect":"Deny",` +
				`"Principal":{"AWS":["*"]},"Action":["s3:DeleteObject"],"Resource":["arn:aws:s3:::%[1]s/protected/*"],` +
				`"Condition":{"Bool":{"aws:SecureTransport":false}}}]}`,
			`{"Statement":[{"Condition":{"Bool":{"aws:SecureTransport":"false"}},` +
				`"Resource":"arn:aws:s3:::%[1]s/protected/*","Action":"s3:DeleteObject","Principal":{"AWS":"*"},` +
				`"Effect":"Deny","Sid":"DenyProtected"}],"Version":"2012-10-17"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, c.server)
			bucket := naming.BucketName("", f.ns, "same")
			sb := f.bucket("same", func(sb *bkv1.StorageBucket) {
				sb.Spec.Policy = &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(c.spec, bucket))}
			})
			f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			stored, err := f.admin.GetBucketPolicy(f.ctx, bucket)
			must(t, err)
			t.Logf("the store gives back: %s", stored)

			equivalent := fmt.Sprintf(c.equivalent, bucket)
			must(t, f.admin.PutBucketPolicy(f.ctx, bucket, equivalent))
			outOfBand, err := f.admin.GetBucketPolicy(f.ctx, bucket)
			must(t, err)

			// The running manager resyncs (reads the policy again) and writes nothing.
			before := requests.snapshot(f.store)
			f.eventually(60*time.Second, "a resync that reads the policy", func() error {
				if _, _, ops := since(before, requests.snapshot(f.store)); ops["GetBucketPolicy"] < 2 {
					return fmt.Errorf("ops since the out-of-band write: %v", ops)
				}
				return nil
			})
			if _, mutating, ops := since(before, requests.snapshot(f.store)); mutating != 0 {
				t.Errorf("resyncs of an equivalent policy wrote to the store: %v", ops)
			}

			// A fresh reconciler: nothing remembered. It leaves the converged bucket
			// until its slot within the sync interval, then compares every setting.
			var ops []string
			stores := &stores.Registry{Client: k8s, APIReader: k8s, Factory: s3.New,
				Observer: func(_ string, op string, _ int, _ error) { ops = append(ops, op) }}
			recorder := events.NewFakeRecorder(10)
			clk := clocktesting.NewFakeClock(time.Now())
			r := &storagebucket.Reconciler{Client: k8s, Recorder: recorder, Stores: stores,
				Clock: clk, SyncInterval: time.Hour, ClusterID: clusterID}
			_, err = r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)})
			must(t, err)
			clk.Step(time.Hour)
			_, err = r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)})
			must(t, err)
			read := false
			for _, op := range ops {
				read = read || op == "GetBucketPolicy"
				if s3.IsMutating(op) {
					t.Errorf("a fresh reconcile of an equivalent policy called %s (ops: %v)", op, ops)
				}
			}
			if !read {
				t.Fatalf("the reconcile never read the policy (ops: %v)", ops)
			}
			select {
			case e := <-recorder.Events:
				t.Errorf("a reconcile of an equivalent policy recorded an Event: %s", e)
			default:
			}
			if got := f.eventReasons(sb)[bkv1.ReasonConfigApplied]; got != 0 {
				t.Errorf("%d ConfigApplied Events for an equivalent policy", got)
			}
			now, err := f.admin.GetBucketPolicy(f.ctx, bucket)
			must(t, err)
			if now != outOfBand {
				t.Errorf("the stored policy changed from %s to %s", outOfBand, now)
			}
		})
	}
}
