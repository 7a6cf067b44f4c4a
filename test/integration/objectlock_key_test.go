package integration_test

import (
	"net/http"
	"slices"
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
// carries object lock headers (a retention of its own, in either mode, longer or
// shorter than the bucket's default, or a legal hold), though its policy has neither
// s3:PutObjectRetention nor s3:PutObjectLegalHold: true where the store applies them
// (Ceph RGW checks no permission for the lock headers of PutObject, and offers no
// condition key on them that a policy could deny), false where it refuses with
// AccessDenied.
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

// allowCompliance lets the store's claims ask for Compliance, which once gave their
// keys s3:PutObjectRetention.
func allowCompliance(s *bkv1.ObjectStore) {
	s.Spec.Guardrails.ObjectLock.AllowedModes = []bkv1.ObjectLockMode{bkv1.ObjectLockGovernance, bkv1.ObjectLockCompliance}
}

// TestObjectLockKeyCannotChangeRetention: on a store whose admin allows Compliance, two
// claims with a default retention of a day, one Governance and one Compliance, each with
// its own ReadWrite key, as an application holds it. Acting with that key alone, as a
// compromised application would (retentionAttack): it cannot set the retention of the
// version it wrote at all (neither lift it to a Governance one of two minutes, which
// Versity, keeping no retention per version, once took in place of the bucket's
// default, nor lengthen it), and where the store checks PutObject's lock headers it
// writes no version with a shorter retention of its own. What it writes plainly gets
// the bucket's default, and the operator's key reads its version and retention
// unchanged and cannot delete it. Nothing waits for a retention to run out.
func TestObjectLockKeyCannotChangeRetention(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, server, withIAMOn(server), allowCompliance)
			for _, lock := range []*bkv1.ObjectLock{governance(1), compliance(1)} {
				name := strings.ToLower(string(lock.DefaultRetention.Mode))
				sb := f.bucket(name, func(sb *bkv1.StorageBucket) { sb.Spec.Access, sb.Spec.ObjectLock = "ReadWrite", lock })
				bucket := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
				f.waitAccessReady(&bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}})
				def := s3.DefaultRetention{Mode: s3.RetentionMode(strings.ToUpper(name)), Days: 1}
				headersErr := f.retentionAttack(server.Kind, f.rawKeyClient(name+"-access"), bucket, def)
				if def.Mode != s3.RetentionCompliance {
					continue
				}
				lockTable.Set(t, server.Kind, rowLockRetention, "refused (`AccessDenied` 403): lifting, shortening or lengthening a version's retention, on a Governance and on a Compliance default")
				if headersErr == nil {
					lockTable.Set(t, server.Kind, rowLockShort, "applied: the version is locked in Governance for the key's 20 seconds, not for the bucket's Compliance day, or held until the store's admin lifts it")
				} else {
					lockTable.Set(t, server.Kind, rowLockShort, "refused ("+refusalCell(headersErr)+")")
				}
			}
		})
	}
}

// retentionAttack is what a key (or a keyless session: any client of the application's
// identity) of a locked bucket whose default retention is def tries on retention, and
// what the operator's key then reads. The key writes a version plainly; its
// PutObjectRetention of it is refused with AccessDenied, lifting it to a Governance
// retention of two minutes (with or without asking to bypass Governance) and
// lengthening it alike. Its PutObject of a new version with a Governance retention of
// 20 seconds of its own, and one with a legal hold, are refused, or applied where
// keyLockHeaders says the store applies them (then the operator's key reads that
// retention, or the hold, on the new version). The operator's key reads the plain
// version's retention as the default gave it (on a store that keeps retention per
// version), lists it, and is refused its own DELETE of it without a bypass: the lock
// holds. It returns the store's answer to the short-retention write.
func (f *fixture) retentionAttack(kind testenv.S3Kind, key *awss3.Client, bucket string, def s3.DefaultRetention) (shortErr error) {
	t := f.t
	t.Helper()
	plain := aws.String("ledger/plain.csv")
	var version string
	f.eventually(30*time.Second, "the key to write", func() error {
		out, err := key.PutObject(f.ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: plain, Body: strings.NewReader("a,b\n")})
		if err == nil {
			version = aws.ToString(out.VersionId)
		}
		return err
	})
	written := time.Now()
	setRetention := func(mode types.ObjectLockRetentionMode, until time.Time, bypass bool) error {
		_, err := key.PutObjectRetention(f.ctx, &awss3.PutObjectRetentionInput{Bucket: &bucket, Key: plain, VersionId: &version,
			BypassGovernanceRetention: aws.Bool(bypass), Retention: &types.ObjectLockRetention{Mode: mode, RetainUntilDate: aws.Time(until)}})
		return err
	}
	wantRawDenied(t, "the key lifting the version's retention to Governance for two minutes", setRetention(types.ObjectLockRetentionModeGovernance, time.Now().Add(2*time.Minute), false))
	wantRawDenied(t, "the key lifting the version's retention to Governance for two minutes, bypassing Governance", setRetention(types.ObjectLockRetentionModeGovernance, time.Now().Add(2*time.Minute), true))
	wantRawDenied(t, "the key lengthening the version's retention", setRetention(types.ObjectLockRetentionMode(def.Mode), time.Now().Add(48*time.Hour), false))

	short := "ledger/short.csv"
	out, shortErr := key.PutObject(f.ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: &short, Body: strings.NewReader("x"),
		ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(time.Now().Add(20 * time.Second))})
	switch applied := shortErr == nil; {
	case applied != keyLockHeaders[kind]:
		t.Errorf("the key's PutObject with a Governance retention of 20 seconds: %v; want applied %v", shortErr, keyLockHeaders[kind])
	case applied:
		ret, err := f.admin.GetObjectRetention(f.ctx, bucket, short, aws.ToString(out.VersionId))
		must(t, err)
		if ret.Mode != s3.RetentionGovernance || ret.Until.After(time.Now().Add(time.Minute)) {
			t.Errorf("the key's own short retention reads %+v", ret)
		}
	default:
		wantRawDenied(t, "the key's PutObject with a Governance retention of 20 seconds", shortErr)
	}
	held := "ledger/held.csv"
	out, err := key.PutObject(f.ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: &held, Body: strings.NewReader("x"),
		ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	switch applied := err == nil; {
	case applied != keyLockHeaders[kind]:
		t.Errorf("the key's PutObject with a legal hold: %v; want applied %v", err, keyLockHeaders[kind])
	case applied:
		if on, err := f.admin.GetObjectLegalHold(f.ctx, bucket, held, aws.ToString(out.VersionId)); err != nil || !on {
			t.Errorf("the key's own legal hold reads %v, %v", on, err)
		}
	default:
		wantRawDenied(t, "the key's PutObject with a legal hold", err)
	}

	// As the operator's key sees it: the version, locked as the default locked it.
	ret, err := f.admin.GetObjectRetention(f.ctx, bucket, *plain, version)
	must(t, err)
	if retentionPerVersion(kind) {
		if ret.Mode != def.Mode || ret.Until.Before(written.Add(time.Duration(def.Days)*24*time.Hour-time.Hour)) || ret.Until.After(time.Now().Add(time.Duration(def.Days)*24*time.Hour+time.Hour)) {
			t.Errorf("the version's retention %+v, want %s until %d day(s) after it was written", ret, def.Mode, def.Days)
		}
	} else if ret.Mode != "" {
		t.Errorf("the version's retention %+v; this store was expected to give it none, the bucket's default locking it", ret)
	}
	if _, err := f.server.Client().DeleteObject(f.ctx, &awss3.DeleteObjectInput{Bucket: &bucket, Key: plain, VersionId: &version}); err == nil {
		t.Errorf("the operator's key deleted the version without a bypass: its lock was gone")
	}
	page, err := f.admin.ListObjectVersions(f.ctx, bucket, nil)
	must(t, err)
	if !slices.ContainsFunc(page.Versions, func(v s3.ObjectVersion) bool { return v.VersionID == version }) {
		t.Errorf("versions %+v: the key's version is gone", page.Versions)
	}
	return shortErr
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
