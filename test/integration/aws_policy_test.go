package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestOperatorRunsUnderTheAWSPolicy runs the operator on moto, the AWS stand-in, with an
// identity that holds exactly the policy docs/access.md gives for AWS, read from that file:
// the store becomes Ready with its IAM provider, a bucket gets every setting and a
// ReadWrite probe, an application gets a key that works, is rotated and revoked, and
// the bucket is purged and deleted. The store trusts the cluster's ServiceAccount
// tokens too (keyless access): the issuer is registered, an access for a
// ServiceAccount gets a role whose session reaches the bucket, and the role goes with
// the access. Any permission the policy lacks shows as a condition that never turns
// True. moto enforces the policy (a bucket outside the prefix is
// refused), so the test cannot pass on a policy that is ignored.
func TestOperatorRunsUnderTheAWSPolicy(t *testing.T) {
	t.Parallel()
	const prefix = "team"
	srv := moto
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	iamc := srv.IAMClient()
	admin, err := iamc.GetUser(ctx, &awsiam.GetUserInput{})
	must(t, err)
	account := strings.Split(aws.ToString(admin.User.Arn), ":")[4] // arn:aws:iam::<account>:user/<name>
	operatorUser := "bucketkeeper-operator-" + randomHex(4)        // not bk-*: it may not manage itself
	_, err = iamc.CreateUser(ctx, &awsiam.CreateUserInput{UserName: aws.String(operatorUser)})
	must(t, err)
	_, err = iamc.PutUserPolicy(ctx, &awsiam.PutUserPolicyInput{UserName: aws.String(operatorUser),
		PolicyName: aws.String("bucketkeeper-operator"), PolicyDocument: aws.String(awsPolicyForMoto(t, account, prefix))})
	must(t, err)
	key, err := iamc.CreateAccessKey(ctx, &awsiam.CreateAccessKeyInput{UserName: aws.String(operatorUser)})
	must(t, err)
	keyID, secret := aws.ToString(key.AccessKey.AccessKeyId), aws.ToString(key.AccessKey.SecretAccessKey)

	// moto enforces the policy: outside the prefix the operator's key creates nothing.
	operator, err := s3.New(ctx, s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: keyID, SecretAccessKey: secret})
	must(t, err)
	elsewhere := "elsewhere-" + randomHex(4)
	wantDenied(t, "CreateBucket outside the policy's prefix", operator.CreateBucket(ctx, elsewhere, ""))

	f := newFixtureAs(t, srv, keyID, secret, withIAMOn(srv), withWebIdentity(), func(s *bkv1.ObjectStore) {
		s.Spec.BucketNamePrefix = prefix
		s.Spec.Guardrails.ObjectLock.PurgeMayBypassGovernance = true
	})
	if _, err := f.admin.HeadBucket(ctx, elsewhere); s3.KindOf(err) != s3.KindNotFound {
		t.Fatalf("the refused bucket %s: %v, want not found", elsewhere, err)
	}
	f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)

	bucket := naming.BucketName(prefix, f.ns, "data")
	sb := f.bucket("data", func(sb *bkv1.StorageBucket) {
		sb.Spec.Tags = map[string]string{"team": "data"}
		sb.Spec.Versioning = bkv1.VersioningEnabled
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr.To[int32](1)}}}
		sb.Spec.PublicAccess = bkv1.PublicAccessBlocked
		sb.Spec.Policy = policyJSON(t, bucket)
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
		sb.Spec.Probe = bkv1.ProbeSpec{Mode: bkv1.ProbeModeReadWrite}
	})
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if got.Status.BucketName != bucket {
		t.Fatalf("bucket %s, want %s", got.Status.BucketName, bucket)
	}
	f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionTrue, "")
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	tags, err := f.admin.GetBucketTagging(ctx, bucket)
	must(t, err)
	if tags["team"] != "data" {
		t.Errorf("tags on the store: %v", tags)
	}
	if v, err := f.admin.GetBucketVersioning(ctx, bucket); err != nil || v != s3.VersioningEnabled {
		t.Errorf("versioning on the store: %v, %v", v, err)
	}

	// A locked bucket with a Governance default retention. It holds nothing: moto reads
	// x-amz-bypass-governance-retention only when it is "True", not the SDK's "true",
	// so no purge of a locked version is tried here (the stores' are, in
	// TestObjectLockPurge).
	locked := f.bucket("locked", func(sb *bkv1.StorageBucket) {
		sb.Spec.ObjectLock = governance(1)
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
	})
	lockedBucket := f.waitObjectLock(locked, "Governance, 1 day").Status.BucketName

	ba := f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite})
	f.waitAccessReady(ba)
	app := f.secretClient("app-creds")
	must(t, app.c.PutObject(ctx, bucket, "hello", []byte("hello")))
	must(t, patchAnnotation(ctx, ba, bkv1.AnnotationRotateRequestedAt, "r1"))
	f.eventually(90*time.Second, "rotation r1 handled and its grace over", func() error {
		cur := &bkv1.BucketAccess{}
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(ba), cur))
		if r := cur.Status.Rotation; r.LastHandledRequest != "r1" || r.State != bkv1.RotationIdle || cur.Status.AccessKeyID == app.id {
			return fmt.Errorf("rotation %+v, key %s", r, cur.Status.AccessKeyID)
		}
		return nil
	})
	rotated := f.secretClient("app-creds")
	must(t, rotated.c.PutObject(ctx, bucket, "after-rotation", []byte("x")))
	f.waitKeyRejected(app, bucket)
	must(t, k8s.Delete(ctx, ba))
	f.waitGone(&bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: ba.Name}})
	f.waitKeyRejected(rotated, bucket)

	// Keyless: the provider and the role, made under the policy.
	f.waitStoreCondition(bkv1.ConditionWebIdentityReady, metav1.ConditionTrue)
	keyless := f.waitAccessReady(f.keylessAccess("keyless", "keyless-creds", "app", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	session, err := f.assume(f.secretData("keyless-creds"), f.serviceAccountToken("app", keylessAudience))
	must(t, err)
	must(t, session.c.PutObject(ctx, bucket, "keyless", []byte("x")))
	must(t, k8s.Delete(ctx, keyless))
	f.waitRoleGone(srv, keyless.Status.IdentityName)

	// Purge: the versions the writes above left, then the bucket, and the locked one.
	must(t, k8s.Delete(ctx, sb))
	must(t, k8s.Delete(ctx, locked))
	f.waitGone(&bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sb.Name}})
	f.waitGone(&bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: locked.Name}})
	for _, b := range []string{bucket, lockedBucket} {
		if _, err := f.admin.HeadBucket(ctx, b); s3.KindOf(err) != s3.KindNotFound {
			t.Fatalf("bucket %s after the purge: %v, want not found", b, err)
		}
	}
}

// awsPolicyForMoto is docs/access.md's AWS policy for the operator with its placeholders
// filled in, adapted where moto cannot evaluate it as AWS does, and only there: moto
// checks no resource for IAM actions (it evaluates every IAM call against "*"), so the
// statements scoped to users and roles bk-* and to OIDC providers would match nothing,
// and their resources are widened to "*". Those scopes are AWS's to enforce and
// untested here. (Where moto's S3 actions
// differ from AWS's, testenv corrects moto, not the policy: see testenv.motoMain.)
func awsPolicyForMoto(t *testing.T, account, prefix string) string {
	t.Helper()
	doc := awsOperatorPolicy(t, account, prefix)
	widened := 0
	for _, st := range doc.Statement {
		if actions := actionsOf(st["Action"]); len(actions) > 0 && strings.HasPrefix(actions[0], "iam:") && st["Resource"] != "*" {
			st["Resource"] = "*"
			widened++
		}
	}
	if widened == 0 {
		t.Fatal("widened no IAM statement of docs/access.md's AWS policy for moto, want those of the bk-* users and roles")
	}
	out, err := json.Marshal(doc)
	must(t, err)
	return string(out)
}

// awsPolicy is an IAM policy document.
type awsPolicy struct {
	Version   string
	Statement []map[string]any
}

// awsOperatorPolicy is docs/access.md's AWS policy for the operator with its
// placeholders filled in.
func awsOperatorPolicy(t *testing.T, account, prefix string) awsPolicy {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "access.md"))
	must(t, err)
	text := string(readme)
	begin, end := strings.Index(text, "<!-- aws-operator-policy:begin -->"), strings.Index(text, "<!-- aws-operator-policy:end -->")
	if begin < 0 || end < begin {
		t.Fatal("docs/access.md has no aws-operator-policy block")
	}
	block := text[begin:end]
	block = block[strings.Index(block, "```json")+len("```json") : strings.LastIndex(block, "```")]
	block = strings.NewReplacer("<ACCOUNT_ID>", account, "<BUCKET_NAME_PREFIX>", prefix).Replace(block)
	var doc awsPolicy
	if err := json.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatalf("docs/access.md's AWS policy is not JSON: %v", err)
	}
	return doc
}

func actionsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, a := range v {
			out = append(out, fmt.Sprint(a))
		}
		return out
	}
	return nil
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	must(t, err)
	return root
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
