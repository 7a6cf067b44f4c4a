package s3

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// What a store lacks, and what its answers to the calls it lacks would do. The
// operator reads a setting before it writes one and stops where the read says the store
// has none, so these writes never reach such a store from it; they are pinned because on
// MinIO they reach other handlers.

// publicAccessBlockMissing pins a store without public-access blocks: its GET answers
// expect.publicAccessBlock (where the operator stops: a note in Configured). On MinIO a
// PUT reaches its CreateBucket (MalformedXML) and a DELETE its DeleteBucket, which
// deletes the bucket when it is empty.
func publicAccessBlockMissing(ctx context.Context, t *testing.T, s *store, b string, get error, want PublicAccessBlock) {
	wantKind(t, s, "GetPublicAccessBlock", get, s.expect.publicAccessBlock)
	put := s.c.PutPublicAccessBlock(ctx, b, want)
	wantKind(t, s, "PutPublicAccessBlock", put, cmp.Or(s.expect.publicAccessBlockPut, s.expect.publicAccessBlock))
	var notes []string
	if codeOf(put) != codeOf(get) {
		notes = append(notes, "a PUT answers "+codeOf(put))
	}

	// With an object in it, then empty.
	must(t, "PutObject", s.c.PutObject(ctx, b, "kept", []byte("kept")))
	del := s.c.DeletePublicAccessBlock(ctx, b)
	answer(t, s, "DeletePublicAccessBlock of a bucket holding an object", del)
	must(t, "DeleteObject", s.c.DeleteObject(ctx, b, "kept"))
	delEmpty := s.c.DeletePublicAccessBlock(ctx, b)
	answer(t, s, "DeletePublicAccessBlock of an empty bucket", delEmpty)
	_, head := s.c.HeadBucket(ctx, b)
	answer(t, s, "HeadBucket after DeletePublicAccessBlock", head)
	switch gone := KindOf(head) == KindNotFound; {
	case s.expect.publicAccessBlockDeleteDeletesBucket:
		if !gone || delEmpty != nil || KindOf(del) != KindNotEmpty {
			t.Errorf("DeletePublicAccessBlock: %v with an object, %v empty, then HeadBucket %v; want BucketNotEmpty, then the bucket deleted", del, delEmpty, head)
		}
		notes = append(notes, "a DELETE deletes the bucket when it is empty")
	case gone || head != nil:
		t.Errorf("the bucket after DeletePublicAccessBlock: %v", head)
	default:
		wantKind(t, s, "DeletePublicAccessBlock", del, s.expect.publicAccessBlock)
		wantKind(t, s, "DeletePublicAccessBlock of an empty bucket", delEmpty, s.expect.publicAccessBlock)
		if codeOf(del) != codeOf(get) {
			notes = append(notes, "a DELETE answers "+codeOf(del))
		}
	}
	cell := answerCell(get)
	if len(notes) > 0 {
		cell += "; the operator writes none: " + strings.Join(notes, ", and ")
	}
	observedTable.Set(t, s.kind, rowPublicAccessBlock, cell)
}

// abortUploadsContract pins a store without AbortIncompleteMultipartUpload in its
// lifecycle rules (MinIO): a rule of it alone is refused, and beside an expiration it is
// accepted and not kept. It returns the table's cell.
func abortUploadsContract(ctx context.Context, t *testing.T, s *store, b string, rules []LifecycleRule) string {
	if rules[0].AbortIncompleteMultipartUploadDays == nil || rules[0].ExpirationDays != nil {
		t.Fatalf("the lifecycle case's first rule is no AbortIncompleteMultipartUpload alone: %s", fmtRules(rules[:1]))
	}
	alone := s.c.PutBucketLifecycle(ctx, b, rules[:1])
	wantKind(t, s, "PutBucketLifecycle of an AbortIncompleteMultipartUpload rule", alone, KindInvalid)
	both := LifecycleRule{ID: "expire-tmp", Prefix: "tmp/", ExpirationDays: i32(1), AbortIncompleteMultipartUploadDays: i32(2)}
	must(t, "PutBucketLifecycle of an expiration with AbortIncompleteMultipartUpload", s.c.PutBucketLifecycle(ctx, b, []LifecycleRule{both}))
	got, err := s.c.GetBucketLifecycle(ctx, b)
	must(t, "GetBucketLifecycle", err)
	kept := both
	kept.AbortIncompleteMultipartUploadDays = nil
	if !reflect.DeepEqual(got, []LifecycleRule{kept}) {
		t.Errorf("an expiration with AbortIncompleteMultipartUpload read back as %s, want %s", fmtRules(got), fmtRules([]LifecycleRule{kept}))
	}
	return fmt.Sprintf("yes, without `AbortIncompleteMultipartUpload`: a rule of it alone answers %s, beside an expiration it is dropped", codeOf(alone))
}

// codeOf is an answer's code and HTTP status as the table writes them.
func codeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return fmt.Sprintf("`%s` %d", e.Code, e.StatusCode)
	}
	if err == nil {
		return "success"
	}
	return err.Error()
}
