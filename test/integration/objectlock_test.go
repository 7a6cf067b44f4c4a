package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

func governance(days int32) *bkv1.ObjectLock {
	return &bkv1.ObjectLock{DefaultRetention: &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockGovernance, Days: ptr.To(days)}}
}

func compliance(days int32) *bkv1.ObjectLock {
	return &bkv1.ObjectLock{DefaultRetention: &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockCompliance, Days: ptr.To(days)}}
}

// TestObjectLockGuardrailsRefuseBeforeAnyRequest: on a store whose admin allows
// Governance alone (the default) and at most a year, a tenant asks for Compliance, for
// two years of Governance, and for Compliance in a suspended claim. Each is Stalled with
// ObjectLockNotAllowed naming the guardrail, and the store saw no request for them: no
// bucket, nothing created, tagged or locked (the only requests are the store's health
// checks).
func TestObjectLockGuardrailsRefuseBeforeAnyRequest(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, server, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.ObjectLock.MaxRetentionDays = ptr.To(int32(365)) })
			f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
			tenant := asTenant(t, f)
			before := requests.snapshot(f.store)
			claim := func(name string, lock *bkv1.ObjectLock, suspend bool) *bkv1.StorageBucket {
				sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
					Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, ObjectLock: lock, Suspend: suspend}}
				must(t, tenant.Create(f.ctx, sb))
				return sb
			}
			twoYears := &bkv1.ObjectLock{DefaultRetention: &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockGovernance, Years: ptr.To(int32(2))}}
			refused := []*bkv1.StorageBucket{
				f.waitStalled(claim("sealed", compliance(1), false), bkv1.ReasonObjectLockNotAllowed, "only the admin can allow it"),
				f.waitStalled(claim("long", twoYears, false), bkv1.ReasonObjectLockNotAllowed, "maxRetentionDays (365 days"),
				f.waitStalled(claim("sleeping", compliance(1), true), bkv1.ReasonObjectLockNotAllowed, "allowedModes"),
			}
			for _, sb := range refused {
				if sb.Status.BucketName != "" || sb.Status.CreateIntent != nil {
					t.Errorf("%s records a bucket: %q %+v", sb.Name, sb.Status.BucketName, sb.Status.CreateIntent)
				}
				if _, err := f.admin.HeadBucket(f.ctx, naming.BucketName("", f.ns, sb.Name)); s3.KindOf(err) != s3.KindNotFound {
					t.Errorf("%s's bucket: %v, want none", sb.Name, err)
				}
			}
			if _, _, ops := since(before, requests.snapshot(f.store)); len(ops) > 1 || len(ops) == 1 && ops["ListBuckets"] == 0 {
				t.Errorf("requests for refused claims: %v; want the health checks' ListBuckets alone", ops)
			}
		})
	}
}

// TestPacedObjectLockIsConfigurationLikeAnyOther, on each store: a claim's bucket, created
// without object lock and written to, gets it when the spec asks (versioning enabled
// first), with a default retention of two days; the default retention removed on the
// store by hand, then shortened by hand, is put back within a sync. The version written
// before the default retention was set is locked by it only where the store counts the
// retention from when it was set (Versity), not from each write. Beside it, a bucket
// made locked with a Compliance default retention by the store's admin is adopted by a
// claim that asks for no object lock: it keeps its lock, and the claim reports it.
func TestPacedObjectLockIsConfigurationLikeAnyOther(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			testObjectLockConfiguration(t, server)
		})
	}
}

func testObjectLockConfiguration(t *testing.T, server *testenv.S3Server) {
	f := newFixture(t, server, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{} })
	sb := f.bucket("records")
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := got.Status.BucketName
	if got.Status.ObjectLock != nil {
		t.Errorf("status.objectLock %+v before any was asked for", got.Status.ObjectLock)
	}
	must(t, f.admin.PutBucketVersioning(f.ctx, bucket, s3.VersioningEnabled))
	must(t, f.admin.PutObject(f.ctx, bucket, "before", []byte("written before the lock")))
	page, err := f.admin.ListObjectVersions(f.ctx, bucket, nil)
	must(t, err)
	before := s3.ObjectID{Key: "before", VersionID: page.Versions[0].VersionID}

	f.update(k8s, sb, func() { sb.Spec.ObjectLock = governance(2) })
	f.waitObjectLock(sb, "Governance, 2 days")
	want := s3.DefaultRetention{Mode: s3.RetentionGovernance, Days: 2}
	if l := f.lockOf(bucket); !l.Enabled || l.DefaultRetention == nil || *l.DefaultRetention != want {
		t.Fatalf("the bucket's object lock: %+v", l)
	}
	lockTable.Set(t, server.Kind, rowLockExisting, "yes, on a versioned bucket (the operator enables versioning first)")

	err = f.admin.DeleteObjects(f.ctx, bucket, []s3.ObjectID{before})
	switch locked := err != nil; {
	case locked && s3.KindOf(err) != s3.KindAccessDenied:
		t.Fatalf("deleting the version written before the lock: %v", err)
	case locked == retentionPerVersion(server.Kind):
		t.Errorf("the version written before the default retention was set: locked %v (%v)", locked, err)
	case locked:
		lockTable.Set(t, server.Kind, rowLockCounted, "every version of the bucket, those written before it too, for its period from when it was set: no version has a retention of its own, so removing or shortening it unlocks them at once")
	default:
		lockTable.Set(t, server.Kind, rowLockCounted, "each version written after it was set, for its period from that write (the version's own retention, which outlives a change of the default)")
	}

	// Drift: removed by hand, then shortened by hand; put back each time.
	must(t, f.admin.PutObjectLockConfiguration(f.ctx, bucket, s3.ObjectLockConfig{Enabled: true}))
	f.waitStoreLock(bucket, want, "the default retention removed by hand to be put back")
	must(t, f.admin.PutObjectLockConfiguration(f.ctx, bucket, s3.ObjectLockConfig{Enabled: true, DefaultRetention: &s3.DefaultRetention{Mode: s3.RetentionGovernance, Days: 1}}))
	f.waitStoreLock(bucket, want, "the default retention shortened by hand to be put back")
	lockTable.Set(t, server.Kind, rowLockDefault, "yes; put back within a sync")

	// A locked bucket of the store's admin, adopted: it keeps its lock.
	locked := f.ns + "-sealed"
	must(t, f.admin.CreateBucketWithObjectLock(f.ctx, locked, ""))
	sealed := s3.DefaultRetention{Mode: s3.RetentionCompliance, Days: 1}
	must(t, f.admin.PutObjectLockConfiguration(f.ctx, locked, s3.ObjectLockConfig{Enabled: true, DefaultRetention: &sealed}))
	adopted := f.bucket("sealed", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName, sb.Spec.Adoption = locked, bkv1.AdoptionIfUnowned })
	got = f.waitCondition(adopted, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if l := got.Status.ObjectLock; l == nil || l.DefaultRetention.String() != "Compliance, 1 day" {
		t.Errorf("the adopted bucket's status.objectLock %+v, want Compliance, 1 day", l)
	}
	if c := findCond(got, bkv1.ConditionConfigured); !strings.Contains(c.Message, "object lock is on, default retention Compliance, 1 day") {
		t.Errorf("Configured says %q", c.Message)
	}
	if l := f.lockOf(locked); l.DefaultRetention == nil || *l.DefaultRetention != sealed {
		t.Errorf("the adopted bucket's object lock changed: %+v", l)
	}
}

// waitObjectLock waits until sb's status.objectLock says retention (its String) at its
// current generation, Ready.
func (f *fixture) waitObjectLock(sb *bkv1.StorageBucket, retention string) *bkv1.StorageBucket {
	f.t.Helper()
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if l := got.Status.ObjectLock; l == nil || l.DefaultRetention.String() != retention {
		f.t.Fatalf("status.objectLock %+v, want %s", l, retention)
	}
	return got
}

// waitStoreLock waits until the bucket's default retention on the store is want.
func (f *fixture) waitStoreLock(bucket string, want s3.DefaultRetention, what string) {
	f.t.Helper()
	f.eventually(3*syncInterval+30*time.Second, what, func() error {
		l, err := f.admin.GetObjectLockConfiguration(f.ctx, bucket)
		if err != nil {
			return err
		}
		if l.DefaultRetention == nil || *l.DefaultRetention != want {
			return fmt.Errorf("the bucket's default retention is %+v", l.DefaultRetention)
		}
		return nil
	})
}
