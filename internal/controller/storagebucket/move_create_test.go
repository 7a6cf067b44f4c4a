package storagebucket

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// targetS3 is a move's target bucket: fakeS3, which may hold objects, and whose
// CreateBucket may first let someone else make the bucket (squat) and may answer as
// the store chooses (answer: nil for a store that answers its owner's repeat create
// with 200, as Ceph RGW does).
type targetS3 struct {
	*fakeS3
	objects int
	squat   func(*targetS3)
	answer  func(*targetS3) error
}

func (f *targetS3) CreateBucket(ctx context.Context, bucket, region string) error {
	if f.squat != nil {
		f.squat(f)
		f.squat = nil
	}
	if f.answer != nil {
		f.writes = append(f.writes, "CreateBucket")
		return f.answer(f)
	}
	return f.fakeS3.CreateBucket(ctx, bucket, region)
}

func (f *targetS3) ListObjectVersions(context.Context, string, *s3.PageToken) (s3.ObjectVersionPage, error) {
	if err := f.read("ListObjectVersions"); err != nil {
		return s3.ObjectVersionPage{}, err
	}
	return s3.ObjectVersionPage{Versions: make([]s3.ObjectVersion, f.objects)}, nil
}

func (f *targetS3) ListMultipartUploads(context.Context, string, *s3.UploadPageToken) (s3.MultipartUploadPage, error) {
	return s3.MultipartUploadPage{}, f.read("ListMultipartUploads")
}

// someoneElsesBucket makes the target's bucket, untagged, with an object in it.
func someoneElsesBucket(f *targetS3) { f.absent, f.tags, f.objects = false, nil, 1 }

// TestMoveTargetTakesOnlyItsOwnBucket: the bucket a move creates on its target is the
// move's only when nothing says otherwise. A bucket someone else made after the move
// recorded its target, answered BucketAlreadyOwnedByYou (SeaweedFS, Versity) or 200
// (Ceph RGW) to the move's CreateBucket, or found untagged by a later pass (a crash,
// a lost answer) with an object in it, is refused MoveNotAllowed and never written:
// no tags, no versioning, and the record is cleared so that no cleanup touches it. A
// create of this process that went unanswered and lands late is the move's own.
func TestMoveTargetTakesOnlyItsOwnBucket(t *testing.T) {
	unanswered := &s3.Error{Op: "CreateBucket", Bucket: rigBucket, Kind: s3.KindServerError, Code: "InternalError", StatusCode: 500}
	alreadyOwned := &s3.Error{Op: "CreateBucket", Bucket: rigBucket, Kind: s3.KindAlreadyOwnedByYou, Code: "BucketAlreadyOwnedByYou", StatusCode: 409}
	for _, tc := range []struct {
		name string
		// recorded: an earlier pass recorded the target (status.move.targetBucket).
		recorded bool
		bucket   targetS3
		// refused: the move is refused MoveNotAllowed; else it takes the bucket.
		refused bool
	}{
		{name: "created", bucket: targetS3{fakeS3: &fakeS3{absent: true}}},
		{name: "made by someone else, answered AlreadyOwnedByYou", refused: true,
			bucket: targetS3{fakeS3: &fakeS3{absent: true}, squat: someoneElsesBucket}},
		{name: "made empty by someone else, answered AlreadyOwnedByYou", refused: true,
			bucket: targetS3{fakeS3: &fakeS3{absent: true}, squat: func(f *targetS3) { f.absent = false }}},
		{name: "made by someone else, answered 200", refused: true,
			bucket: targetS3{fakeS3: &fakeS3{absent: true}, squat: someoneElsesBucket, answer: func(*targetS3) error { return nil }}},
		{name: "made by someone else and tagged, answered 200", refused: true,
			bucket: targetS3{fakeS3: &fakeS3{absent: true}, answer: func(*targetS3) error { return nil },
				squat: func(f *targetS3) {
					f.absent, f.tags = false, map[string]string{bkv1.TagClaim: "other/claim", bkv1.TagUID: "other"}
				}}},
		{name: "found untagged after a crash, holding an object", recorded: true, refused: true,
			bucket: targetS3{fakeS3: &fakeS3{}, objects: 1}},
		{name: "found untagged after a crash, empty", recorded: true, bucket: targetS3{fakeS3: &fakeS3{}}},
		{name: "found untagged, not recorded", refused: true, bucket: targetS3{fakeS3: &fakeS3{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &tc.bucket
			g, scope, target, m := newMoveRig(t, f)
			if tc.recorded {
				m.TargetBucket = rigBucket
			}
			err := g.r.ensureMoveTarget(context.Background(), scope, target, m)
			var se *reconcile.StepError
			if !tc.refused {
				if err != nil || m.TargetBucket != rigBucket || f.tags[bkv1.TagUID] == "" {
					t.Fatalf("err %v, target %q, tags %v: want the bucket taken and tagged", err, m.TargetBucket, f.tags)
				}
				return
			}
			if !errors.As(err, &se) || se.Reason != bkv1.ReasonMoveNotAllowed || !se.Terminal {
				t.Fatalf("err %v, want a terminal MoveNotAllowed", err)
			}
			// What the pass writes at its end: the claim's status, which the record's
			// write in the middle of the pass read back from the API server.
			if got := g.sb.Status.Move; got == nil || got.TargetBucket != "" {
				t.Errorf("status.move %+v keeps a target bucket that is not the move's", got)
			}
			if written := slices.DeleteFunc(slices.Clone(f.writes), func(op string) bool { return op == "CreateBucket" }); len(written) > 0 {
				t.Errorf("someone else's bucket written: %v", written)
			}
			t.Logf("refused: %s", se.Message)
		})
	}

	t.Run("a create of this move answered late", func(t *testing.T) {
		f := &targetS3{fakeS3: &fakeS3{absent: true}, answer: func(*targetS3) error { return unanswered }}
		g, scope, target, m := newMoveRig(t, f)
		if err := g.r.ensureMoveTarget(context.Background(), scope, target, m); err == nil || reconcile.AsStepError(err, "").Terminal {
			t.Fatalf("an unanswered create: %v, want a retry", err)
		}
		// It lands after the next pass's HEAD, before that pass's create.
		f.answer = func(f *targetS3) error { f.absent = false; return alreadyOwned }
		if err := g.r.ensureMoveTarget(context.Background(), scope, target, m); err == nil || reconcile.AsStepError(err, "").Terminal || m.TargetBucket != rigBucket {
			t.Fatalf("the late create landing: %v, target %q; want a retry with the record kept", err, m.TargetBucket)
		}
		if err := g.r.ensureMoveTarget(context.Background(), scope, target, m); err != nil || f.tags[bkv1.TagUID] == "" {
			t.Fatalf("the bucket the late create made: %v, tags %v; want it taken", err, f.tags)
		}
	})
}

// newMoveRig is a rig whose claim moves its bucket to the store "target", whose
// bucket is f, in the Copying phase.
func newMoveRig(t *testing.T, f *targetS3) (*rig, *bucketScope, *moveTargetScope, *bkv1.MoveStatus) {
	t.Helper()
	g := newRig(t, f.fakeS3)
	m := &bkv1.MoveStatus{ID: "claimuid-1", From: "store", To: "target", Phase: bkv1.MoveCopying, Pass: 2}
	g.sb.Status.Move = m
	target := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "target"}}
	target.Spec.Endpoint = "http://target.example"
	source := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store"}}
	scope := &bucketScope{sb: g.sb, patcher: g.patcher(), store: source, s3: &fakeS3{}, bucket: rigBucket, owner: g.r.ownerIn(g.sb, "ns-uid")}
	return g, scope, &moveTargetScope{store: target, s3: f, bucket: rigBucket}, m
}
