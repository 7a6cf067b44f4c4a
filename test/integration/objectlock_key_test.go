package integration_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// keyLockHeaders says what a store does with a PutObject of the application's key that
// asks for a Compliance retention itself, though its policy has no s3:PutObjectRetention:
// true where the store applies it (Ceph RGW checks no permission for the lock headers of
// PutObject), false where it refuses with AccessDenied.
var keyLockHeaders = map[testenv.S3Kind]bool{testenv.SeaweedFS: false, testenv.Versity: false, testenv.RGW: true}

// TestObjectLockKeyCannotWeakenIt: a claim with a Governance default retention of a day
// (the shortest S3 takes) and its own ReadWrite key, as an application holds it. Acting
// with that key alone, as a compromised application would: the version it wrote cannot
// be deleted, with or without asking to bypass Governance, singly or in a batch; its
// retention cannot be shortened; the bucket's object lock configuration cannot be
// changed. A plain DELETE only adds a delete marker. The operator's key, read back,
// shows the version and the bucket's lock as they were. Nothing waits for the
// retention to run out.
func TestObjectLockKeyCannotWeakenIt(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			testObjectLockKey(t, server)
		})
	}
}

func testObjectLockKey(t *testing.T, server *testenv.S3Server) {
	f := newFixture(t, server, withIAMOn(server))
	sb := f.bucket("vault", func(sb *bkv1.StorageBucket) {
		sb.Spec.Access = "ReadWrite"
		sb.Spec.ObjectLock = &bkv1.ObjectLock{DefaultRetention: &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockGovernance, Days: ptr.To(int32(1))}}
	})
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := got.Status.BucketName
	if l := got.Status.ObjectLock; l == nil || l.DefaultRetention.String() != "Governance, 1 day" {
		t.Fatalf("status.objectLock %+v, want Governance, 1 day", l)
	}
	if c := findCond(got, bkv1.ConditionConfigured); !strings.Contains(c.Message, "object lock is on, default retention Governance, 1 day") {
		t.Errorf("Configured says %q", c.Message)
	}
	lockBefore := f.lockOf(bucket)
	if !lockBefore.Enabled || lockBefore.DefaultRetention == nil || *lockBefore.DefaultRetention != (s3.DefaultRetention{Mode: s3.RetentionGovernance, Days: 1}) {
		t.Fatalf("the bucket's object lock: %+v", lockBefore)
	}
	if v, err := f.admin.GetBucketVersioning(f.ctx, bucket); err != nil || v != s3.VersioningEnabled {
		t.Errorf("versioning %q, %v; want Enabled", v, err)
	}
	lockTable.Set(t, server.Kind, rowLockCreate, "yes: created locked, versioning on")

	f.waitAccessReady(&bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "vault"}})
	key := f.rawKeyClient("vault-access")
	var version string
	f.eventually(30*time.Second, "the key to write", func() error {
		out, err := key.PutObject(f.ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: aws.String("ledger/2026.csv"), Body: strings.NewReader("a,b\n")})
		if err == nil {
			version = aws.ToString(out.VersionId)
		}
		return err
	})
	written := time.Now()
	id := &awss3.DeleteObjectInput{Bucket: &bucket, Key: aws.String("ledger/2026.csv"), VersionId: &version}

	// What the key is refused, each time with the store's AccessDenied.
	_, deleteErr := key.DeleteObject(f.ctx, id)
	wantRawDenied(t, "the key deleting the version", deleteErr)
	bypass := *id
	bypass.BypassGovernanceRetention = aws.Bool(true)
	_, err := key.DeleteObject(f.ctx, &bypass)
	wantRawDenied(t, "the key deleting the version, bypassing Governance", err)
	batch, err := key.DeleteObjects(f.ctx, &awss3.DeleteObjectsInput{Bucket: &bucket, BypassGovernanceRetention: aws.Bool(true),
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: id.Key, VersionId: &version}}}})
	if err == nil && len(batch.Errors) != 1 {
		t.Errorf("the key's DeleteObjects of the version, bypassing Governance: %d errors, want it refused", len(batch.Errors))
	}
	_, err = key.PutObjectRetention(f.ctx, &awss3.PutObjectRetentionInput{Bucket: &bucket, Key: id.Key, VersionId: &version, BypassGovernanceRetention: aws.Bool(true),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(time.Now().Add(time.Hour))}})
	wantRawDenied(t, "the key shortening the version's retention", err)
	_, err = key.PutObjectLockConfiguration(f.ctx, &awss3.PutObjectLockConfigurationInput{Bucket: &bucket,
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}})
	wantRawDenied(t, "the key removing the bucket's default retention", err)
	_, err = key.PutObjectLegalHold(f.ctx, &awss3.PutObjectLegalHoldInput{Bucket: &bucket, Key: id.Key, VersionId: &version,
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOff}})
	wantRawDenied(t, "the key setting the version's legal hold", err)

	// What it may: a plain DELETE, which adds a delete marker, and reading the lock.
	marker, err := key.DeleteObject(f.ctx, &awss3.DeleteObjectInput{Bucket: &bucket, Key: id.Key})
	if err != nil || !aws.ToBool(marker.DeleteMarker) {
		t.Errorf("the key's plain DELETE: %v (delete marker %v), want a delete marker", err, marker != nil && aws.ToBool(marker.DeleteMarker))
	}
	if _, err := key.GetObjectRetention(f.ctx, &awss3.GetObjectRetentionInput{Bucket: &bucket, Key: id.Key, VersionId: &version}); err != nil && s3.KindOf(err) == s3.KindAccessDenied {
		t.Errorf("the key may not read the version's retention: %v", err)
	}

	// As the operator's key sees it: the version, the marker on it, the lock unchanged.
	page, err := f.admin.ListObjectVersions(f.ctx, bucket, nil)
	must(t, err)
	kept, markers := false, 0
	for _, v := range page.Versions {
		kept = kept || v.VersionID == version
		if v.IsDeleteMarker {
			markers++
		}
	}
	if !kept || markers != 1 {
		t.Fatalf("versions %+v: want the key's version and one delete marker", page.Versions)
	}
	if after := f.lockOf(bucket); !after.Enabled || after.DefaultRetention == nil || *after.DefaultRetention != *lockBefore.DefaultRetention {
		t.Errorf("the bucket's object lock changed: %+v", after)
	}
	lockTable.Set(t, server.Kind, rowLockKey, "refused ("+refusalCell(deleteErr)+"): deleting a locked version (bypassing or not), shortening its retention, a legal hold, the bucket's lock configuration; a plain DELETE adds a delete marker")

	ret, err := f.admin.GetObjectRetention(f.ctx, bucket, *id.Key, version)
	must(t, err)
	if retentionPerVersion(server.Kind) {
		if ret.Mode != s3.RetentionGovernance || ret.Until.Before(written.Add(23*time.Hour)) || ret.Until.After(time.Now().Add(25*time.Hour)) {
			t.Errorf("the version's retention %+v, want Governance until a day after it was written", ret)
		}
	} else if ret.Mode != "" {
		t.Errorf("the version's retention %+v; this store was expected to give it none", ret)
	}

	// The key's own retention on a write.
	own := "ledger/sealed.csv"
	out, err := key.PutObject(f.ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: &own, Body: strings.NewReader("x"),
		ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(time.Now().Add(24 * time.Hour))})
	switch applied := err == nil; {
	case applied != keyLockHeaders[server.Kind]:
		t.Errorf("the key's PutObject with a Compliance retention: %v; want applied %v", err, keyLockHeaders[server.Kind])
	case applied:
		ret, err := f.admin.GetObjectRetention(f.ctx, bucket, own, aws.ToString(out.VersionId))
		must(t, err)
		if ret.Mode != s3.RetentionCompliance {
			t.Errorf("the key's own retention reads %+v", ret)
		}
		lockTable.Set(t, server.Kind, rowLockHeaders, "applied, Compliance too: the key locks what it writes as it likes, past the store's `allowedModes`")
	default:
		wantRawDenied(t, "the key's PutObject with a Compliance retention", err)
		lockTable.Set(t, server.Kind, rowLockHeaders, "refused ("+refusalCell(err)+")")
	}
}

// retentionPerVersion says whether a store gives each version written under a default
// retention a retention of its own (see the s3 package's contract test).
func retentionPerVersion(kind testenv.S3Kind) bool { return kind != testenv.Versity }

// rawKeyClient is an SDK client built from an access Secret alone, for the object lock
// calls the operator's own client does not make.
func (f *fixture) rawKeyClient(secret string) *awss3.Client {
	f.t.Helper()
	s := &corev1.Secret{}
	must(f.t, k8s.Get(f.ctx, objKey(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: secret}}), s))
	d := s.Data
	return awss3.New(awss3.Options{
		Region: string(d[bkv1.AccessSecretKeyRegion]), BaseEndpoint: aws.String(string(d[bkv1.AccessSecretKeyEndpoint])), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(string(d[bkv1.AccessSecretKeyAccessKeyID]), string(d[bkv1.AccessSecretKeySecretKey]), ""),
		HTTPClient:  &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second},
	})
}

// lockOf is the bucket's object lock as the operator's key reads it.
func (f *fixture) lockOf(bucket string) s3.ObjectLockConfig {
	f.t.Helper()
	cfg, err := f.admin.GetObjectLockConfiguration(f.ctx, bucket)
	must(f.t, err)
	return cfg
}

func wantRawDenied(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || !strings.Contains(refusalCell(err), "`AccessDenied` 403") {
		t.Errorf("%s: %v, want AccessDenied", what, err)
	}
}
