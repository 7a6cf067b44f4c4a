package integration_test

import (
	"fmt"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMoveOntoItselfIsRefused: the platform team declared one server twice, as two
// ObjectStores (two lanes of one server), and a tenant asks to move its bucket from
// one to the other, with deleteSourceAfter. Copied onto itself, the bucket would be
// frozen for good at the cutover and then deleted as the move's source. The move is
// refused (Stalled, MoveNotAllowed) on each store, whether the second ObjectStore names
// the server by the same endpoint or by another address of it (an IPv4-mapped IPv6
// one): the bucket's objects, tags and policy are unchanged, no freeze, and cancelling
// the move leaves the bucket Ready where it was.
func TestMoveOntoItselfIsRefused(t *testing.T) {
	for _, srv := range []*testenv.S3Server{seaweed, versity, rgw} {
		endpoint, err := url.Parse(srv.Endpoint)
		must(t, err)
		for _, tc := range []struct{ name, endpoint string }{
			{"the same endpoint", srv.Endpoint},
			{"another address of the server", "http://[::ffff:" + endpoint.Hostname() + "]:" + endpoint.Port()},
		} {
			testMoveOntoItself(t, srv, tc.name, tc.endpoint)
		}
	}
}

func testMoveOntoItself(t *testing.T, srv *testenv.S3Server, name, aliasEndpoint string) {
	t.Run(string(srv.Kind)+"/"+name, func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, srv)
		alias := f.storeNamed(f.store+"-alias", srv, func(s *bkv1.ObjectStore) { s.Spec.Endpoint = aliasEndpoint })
		f.waitNamedStoreCondition(alias, bkv1.ConditionReady, metav1.ConditionTrue, "")
		sb := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		bucket := sb.Status.BucketName
		seeded := f.seedObjects(f.admin, bucket, 5)
		tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
		must(t, err)
		policy, err := f.admin.GetBucketPolicy(f.ctx, bucket)
		must(t, err)

		f.update(k8s, sb, func() {
			sb.Spec.Move = &bkv1.MoveSpec{DeleteSourceAfter: &metav1.Duration{Duration: time.Second}}
			sb.Spec.ObjectStoreRef.Name = alias
		})
		refused := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonMoveNotAllowed)
		if c := findCond(refused, bkv1.ConditionStalled); !strings.Contains(c.Message, "serves the very bucket") {
			t.Errorf("refusal %q does not say the target is the same bucket", c.Message)
		}
		unchanged := func(when string) {
			t.Helper()
			for key, sum := range seeded {
				if body, err := f.admin.GetObject(f.ctx, bucket, key, 1<<20); err != nil || sha256Of(body) != sum {
					t.Errorf("%s: object %s: %v", when, key, err)
				}
			}
			if got, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || !maps.Equal(got, tags) {
				t.Errorf("%s: tags %v (%v), want %v", when, got, err, tags)
			}
			if got, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || got != policy {
				t.Errorf("%s: policy %q (%v), want %q", when, got, err, policy)
			}
		}
		unchanged("after the refusal")

		f.update(k8s, sb, func() { sb.Spec.ObjectStoreRef.Name = f.store })
		back := f.waitMove(sb, bkv1.MoveAborted, time.Minute)
		f.waitCondition(back, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		if _, err := f.admin.HeadBucket(f.ctx, bucket); err != nil {
			t.Fatalf("the bucket after the cancelled move: %v", err)
		}
		unchanged("after the move was cancelled")
		f.eventually(30*time.Second, "Stalled gone once the move is cancelled", func() error {
			if c := findCond(f.get(sb), bkv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
				return fmt.Errorf("still stalled: %s", c.Message)
			}
			return nil
		})
		if aliasEndpoint != srv.Endpoint {
			moveTable.Set(t, srv.Kind, moveRow(srv.Kind), cellMoveOntoItself)
		}
	})
}
