package storagebucket

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestOwnedReason: a bucket this claim's tags already mark as its own, with no
// Provisioned condition yet (the pass that tagged it lost its status write), is
// reported as what that pass did, read from the status and spec it started from.
func TestOwnedReason(t *testing.T) {
	const bucket = "team-a-logs"
	claim := func(adoption bkv1.AdoptionPolicy, intent *bkv1.CreateIntent) *bkv1.StorageBucket {
		sb := &bkv1.StorageBucket{}
		sb.UID = types.UID("uid-1")
		sb.Spec.Adoption = adoption
		sb.Status.CreateIntent = intent
		return sb
	}
	for _, tc := range []struct {
		name string
		sb   *bkv1.StorageBucket
		want string
	}{
		{"created by this object", claim(bkv1.AdoptionNever, &bkv1.CreateIntent{BucketName: bucket, UID: "uid-1"}), bkv1.ReasonBucketCreated},
		{"created by this object, adoption allowed", claim(bkv1.AdoptionIfUnowned, &bkv1.CreateIntent{BucketName: bucket, UID: "uid-1"}), bkv1.ReasonBucketCreated},
		{"adopted", claim(bkv1.AdoptionIfUnowned, nil), bkv1.ReasonBucketAdopted},
		{"intent of an earlier object of the same name", claim(bkv1.AdoptionIfUnowned, &bkv1.CreateIntent{BucketName: bucket, UID: "uid-0"}), bkv1.ReasonBucketAdopted},
		{"intent for another bucket", claim(bkv1.AdoptionNever, &bkv1.CreateIntent{BucketName: "other", UID: "uid-1"}), bkv1.ReasonBucketBound},
		{"neither", claim(bkv1.AdoptionNever, nil), bkv1.ReasonBucketBound},
	} {
		if got, _ := ownedReason(tc.sb, bucket); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestCreateAfterAnUnansweredCreate: each CreateBucket is recorded in status with when
// it was sent, before it is sent. One that goes unanswered is remembered until it can
// no longer land; a bucket that then answers "already yours" to the next CreateBucket is
// most likely that one, landed late, and stays this claim's to finish; without an
// unanswered one before, it is someone else's and the intent goes.
func TestCreateAfterAnUnansweredCreate(t *testing.T) {
	unanswered := &s3.Error{Op: "CreateBucket", Bucket: rigBucket, Kind: s3.KindTimeout}
	bucket := &fakeS3{absent: true, errs: map[string]error{"CreateBucket": unanswered}}
	g := newRig(t, bucket)
	scope := func() *bucketScope {
		return &bucketScope{sb: g.sb, patcher: g.patcher(), s3: bucket, bucket: rigBucket, store: &bkv1.ObjectStore{},
			owner: g.r.ownerIn(g.sb, "ns-uid")}
	}
	if err := g.r.createBucket(context.Background(), scope()); s3.KindOf(err) != s3.KindTimeout {
		t.Fatalf("createBucket = %v, want the timeout", err)
	}
	server := &bkv1.StorageBucket{}
	if err := g.r.Get(context.Background(), client.ObjectKeyFromObject(g.sb), server); err != nil {
		t.Fatal(err)
	}
	intent := server.Status.CreateIntent
	if intent == nil || intent.SentAt == nil || !intent.SentAt.Time.Equal(g.clock.Now().Truncate(time.Second)) {
		t.Fatalf("intent on the server %+v, want one sent now", intent)
	}
	if landBy := g.r.createsLandBy(g.sb); !landBy.Equal(g.clock.Now().Add(rigSettle)) {
		t.Errorf("the unanswered create may land until %v, want settle time after it ended", landBy)
	}

	// The store carried it out after all; the next pass's CreateBucket meets it.
	bucket.absent, bucket.errs = false, nil
	g.clock.Step(5 * time.Second)
	if err := g.r.createBucket(context.Background(), scope()); s3.KindOf(err) != s3.KindAlreadyOwnedByYou {
		t.Fatalf("createBucket = %v, want AlreadyOwnedByYou", err)
	}
	if !createIntended(g.sb, rigBucket) {
		t.Errorf("the intent went although the bucket may be this claim's own late create")
	}

	// Long after: an "already yours" bucket is someone else's with these credentials.
	g.clock.Step(time.Hour)
	if err := g.r.createBucket(context.Background(), scope()); s3.KindOf(err) != s3.KindAlreadyOwnedByYou {
		t.Fatalf("createBucket = %v, want AlreadyOwnedByYou", err)
	}
	if g.sb.Status.CreateIntent != nil {
		t.Errorf("intent %+v kept for a bucket no create of this claim can have made", g.sb.Status.CreateIntent)
	}
}

// TestUnansweredCreateKeepsItsStoreHome: a claim whose first CreateBucket went
// unanswered on one store, then pointed at another with spec.move before it was
// provisioned, keeps the first store as its home: the bucket that create may still make
// there is finished and then moved, never forgotten untagged on that store (a soak
// finding: BucketOwned, seed 91557079, a late store and a move within its delay).
func TestUnansweredCreateKeepsItsStoreHome(t *testing.T) {
	unanswered := &s3.Error{Op: "CreateBucket", Bucket: rigBucket, Kind: s3.KindTimeout}
	bucket := &fakeS3{absent: true, errs: map[string]error{"CreateBucket": unanswered}}
	g := newRig(t, bucket)
	first := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "first"}}
	g.sb.Spec.ObjectStoreRef.Name = first.Name
	scope := &bucketScope{sb: g.sb, patcher: g.patcher(), s3: bucket, bucket: rigBucket, store: first,
		owner: g.r.ownerIn(g.sb, "ns-uid")}
	if err := g.r.createBucket(context.Background(), scope); s3.KindOf(err) != s3.KindTimeout {
		t.Fatalf("createBucket = %v, want the timeout", err)
	}
	server := &bkv1.StorageBucket{}
	if err := g.r.Get(context.Background(), client.ObjectKeyFromObject(g.sb), server); err != nil {
		t.Fatal(err)
	}
	if intent := server.Status.CreateIntent; intent == nil || intent.ObjectStore != first.Name {
		t.Fatalf("intent on the server %+v, want one naming store %q", intent, first.Name)
	}

	server.Spec.ObjectStoreRef.Name = "second"
	server.Spec.Move = &bkv1.MoveSpec{}
	if home := server.HomeStore(); home != first.Name {
		t.Errorf("home after the spec named another store = %q, want %q, where the create may still land", home, first.Name)
	}
	if !moving(server) {
		t.Errorf("a claim homed on %q and naming %q is not moving", first.Name, "second")
	}
	// Another object of the same name (a new UID) inherits no home from the intent.
	server.UID = "another-uid"
	if home := server.HomeStore(); home != "second" {
		t.Errorf("home of a new object of the name = %q, want its spec's", home)
	}
}

// TestHeadBucketPastADeny: a HEAD the store refuses (a tenant's Deny of s3:ListBucket
// to everyone) is not taken for another account's bucket while the operator may still
// read the bucket's tags; refused both, it is; missing, it is missing either way.
func TestHeadBucketPastADeny(t *testing.T) {
	ctx := context.Background()
	denied := func(op string) error { return s3Err(op, s3.KindAccessDenied) }
	mine := map[string]string{"bucketkeeper.io/uid": "u"}

	f := &fakeS3{tags: mine}
	if tags, err := headBucket(ctx, f, "b"); err != nil || tags != nil {
		t.Errorf("HEAD answered: tags %v, %v; want no tags read, no error", tags, err)
	}
	f = &fakeS3{tags: mine, errs: map[string]error{"HeadBucket": denied("HeadBucket")}}
	if tags, err := headBucket(ctx, f, "b"); err != nil || !maps.Equal(tags, mine) {
		t.Errorf("HEAD denied, tags readable: tags %v, %v; want the tags", tags, err)
	}
	f = &fakeS3{errs: map[string]error{"HeadBucket": denied("HeadBucket"), "GetBucketTagging": denied("GetBucketTagging")}}
	if _, err := headBucket(ctx, f, "b"); s3.KindOf(err) != s3.KindAccessDenied {
		t.Errorf("both denied: %v, want AccessDenied", err)
	}
	f = &fakeS3{errs: map[string]error{"HeadBucket": s3Err("HeadBucket", s3.KindNotFound)}}
	if _, err := headBucket(ctx, f, "b"); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("missing: %v, want NotFound", err)
	}
}

// TestBindingAReleasedFrozenCopy: a copy a move left behind, released with its claim
// (frozen, tagged moved-to), is bound by a later claim of the same namespace and name as
// its home: the freeze's statement leaves the policy (the tenant's statements stay), the
// moved-to tag goes, and the thaw comes before the tagging, so no crash between them
// leaves a bound bucket frozen.
func TestBindingAReleasedFrozenCopy(t *testing.T) {
	ctx := context.Background()
	const tenantStatement = `{"Sid":"Mine","Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + rigBucket + `/private/*"}`
	bucket := &fakeS3{policy: `{"Version":"2012-10-17","Statement":[` + tenantStatement + `]}`}
	if err := freezeBucket(ctx, bucket, rigBucket); err != nil {
		t.Fatal(err)
	}
	if !frozen(bucket.policy) {
		t.Fatalf("the rig's bucket is not frozen: %s", bucket.policy)
	}
	g := newRig(t, bucket)
	me := g.r.ownerIn(g.sb, "ns-uid")
	bucket.tags = me.releasedTags()
	bucket.tags[bkv1.TagMovedTo] = "elsewhere/" + rigBucket
	bucket.tags["team"] = "a"
	bucket.reads, bucket.writes = nil, nil

	scope := &bucketScope{sb: g.sb, patcher: g.patcher(), s3: bucket, bucket: rigBucket, store: &bkv1.ObjectStore{},
		owner: me, syncing: true}
	if err := g.r.reconcileBucket(ctx, scope); err != nil {
		t.Fatalf("reconcileBucket: %v", err)
	}
	if frozen(bucket.policy) {
		t.Errorf("bound still frozen: %s", bucket.policy)
	}
	if !strings.Contains(bucket.policy, `"Mine"`) {
		t.Errorf("the tenant's own statement went with the freeze: %s", bucket.policy)
	}
	if _, moved := bucket.tags[bkv1.TagMovedTo]; moved || me.of(bucket.tags, false) != ownedByUs || bucket.tags["team"] != "a" {
		t.Errorf("tags after binding %v: want this claim's, no moved-to, its own kept", bucket.tags)
	}
	if thaw, tag := slices.Index(bucket.writes, "PutBucketPolicy"), slices.Index(bucket.writes, "PutBucketTagging"); thaw < 0 || tag < thaw {
		t.Errorf("writes %v: want the thaw before the tagging", bucket.writes)
	}
	if c := reconcile.FindCondition(g.sb.Status.Conditions, bkv1.ConditionProvisioned); c == nil || c.Reason != bkv1.ReasonBucketBound {
		t.Errorf("Provisioned %+v, want BucketBound", c)
	}
}
