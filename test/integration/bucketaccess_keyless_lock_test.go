package integration_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestKeylessSessionCannotChangeRetention: a role's session is held to what a key is
// on a locked bucket (TestObjectLockKeyCannotChangeRetention), end to end on Ceph RGW:
// on a store whose admin allows Compliance, two claims with a default retention of a
// day, one Governance and one Compliance, and a keyless ReadWrite access to each.
// The ServiceAccount's session, acting alone as a compromised application would
// (retentionAttack), cannot set the retention of the version it wrote, lifting or
// lengthening it; RGW applies the lock headers of its PutObject (pinned there). The
// operator's key reads the versions and their retention unchanged.
func TestKeylessSessionCannotChangeRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rgwSTS, withIAMOn(rgwSTS), withWebIdentity(), allowCompliance)
	f.waitStoreCondition(bkv1.ConditionWebIdentityReady, metav1.ConditionTrue)
	for _, lock := range []*bkv1.ObjectLock{governance(1), compliance(1)} {
		name := strings.ToLower(string(lock.DefaultRetention.Mode))
		sb := f.bucket(name, func(sb *bkv1.StorageBucket) { sb.Spec.ObjectLock = lock })
		bucket := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
		f.waitAccessReady(f.keylessAccess(name, name+"-creds", "app-"+name, bkv1.BucketGrant{Name: name, Mode: bkv1.AccessReadWrite}))
		session, err := f.assume(f.secretData(name+"-creds"), f.serviceAccountToken("app-"+name, keylessAudience))
		must(t, err)
		f.retentionAttack(rgwSTS.Kind, session.raw, bucket, s3.DefaultRetention{Mode: s3.RetentionMode(strings.ToUpper(name)), Days: 1})
	}
}
