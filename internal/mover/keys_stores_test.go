package mover_test

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// oddKeys are keys a request's path could read as another: dot segments, empty
// segments, an escaped slash, a backslash, and one that climbs out of its bucket into
// a neighbour's ("NEIGHBOUR" is that bucket's name). Besides them, the keys they could
// be mistaken for, each with content of its own.
var (
	oddKeys   = []string{"a/../b", "a/./b", "a//b", "a/.", "./d", "//lead", "/lead", "x/../../NEIGHBOUR/k", "a%2Fb", "a\\b", "dots..", "a/..b", "end/"}
	plainKeys = []string{"b", "a/b", "lead", "k"}
)

// TestMoveOddKeys moves a bucket holding every key of oddKeys its store keeps between
// every pair of stores: each key lands on the target under the same key with its own
// bytes, or the pass fails it by name (the move cannot cut over). Nothing is written
// under another key: the plain keys keep their own content, the target holds no key
// the source does not, and the neighbouring bucket on the target's store stays empty.
func TestMoveOddKeys(t *testing.T) {
	for _, pair := range everyPair() {
		t.Run(string(pair[0].Kind)+"-to-"+string(pair[1].Kind), func(t *testing.T) {
			testMoveOddKeys(t, pair[0], pair[1])
		})
	}
}

func testMoveOddKeys(t *testing.T, from, to *testenv.S3Server) {
	ctx := context.Background()
	src, tgt := newBucket(t, from, false), newBucket(t, to, false)
	neighbour := newBucket(t, to, false)
	content := func(key string) string { return "the object named " + key }
	for _, k := range append(slices.Clone(plainKeys), oddKeys...) {
		k = strings.ReplaceAll(k, "NEIGHBOUR", neighbour.bucket)
		// The source keeps what it keeps: a store refuses some, and writes some under
		// another key (read back below).
		_, _ = src.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(src.bucket), Key: aws.String(k), Body: strings.NewReader(content(k))})
	}
	held, err := src.keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srcContent := map[string]string{}
	for _, k := range held {
		srcContent[k] = readKey(t, src, k)
	}
	t.Logf("%s holds %q", from.Kind, held)

	f := newMove(t, src, tgt, mover.VersionsCurrent)
	p := f.run(mover.ModeFinal, 1)
	failed := map[string]string{}
	for _, x := range p.Failures.First {
		failed[x.Key] = x.Reason
	}
	if p.Failures.Count > int64(len(p.Failures.First)) {
		t.Fatalf("%d failures, more than listed: %s", p.Failures.Count, p.Failures)
	}
	got, err := tgt.keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range got {
		if _, ok := srcContent[k]; !ok {
			t.Errorf("the target holds %q, a key the source does not", k)
		}
	}
	landed := 0
	for _, k := range held {
		switch {
		case failed[k] != "":
			if !strings.Contains(failed[k], "not copied") && !strings.Contains(failed[k], "target:") {
				t.Errorf("key %q failed for another reason: %s", k, failed[k])
			}
			if slices.Contains(got, k) && readKey(t, tgt, k) != srcContent[k] {
				t.Errorf("failed key %q is on the target with other content", k)
			}
		case !slices.Contains(got, k):
			t.Errorf("key %q neither on the target nor failed", k)
		case readKey(t, tgt, k) != srcContent[k]:
			t.Errorf("key %q on the target with another object's content %q", k, readKey(t, tgt, k))
		default:
			landed++
		}
	}
	if len(failed) > 0 && p.Verified {
		t.Errorf("a pass with failed keys %v verified", failed)
	}
	if left, err := neighbour.keys(ctx); err != nil || len(left) > 0 {
		t.Errorf("the neighbouring bucket on %s holds %q (%v)", to.Kind, left, err)
	}
	t.Logf("%s to %s: %d keys landed under their names, %d failed: %v", from.Kind, to.Kind, landed, len(failed), failed)
}

// readKey reads an object's content through a path-free client of the test's: the
// SDK's own.
func readKey(t *testing.T, s side, key string) string {
	t.Helper()
	out, err := s.c.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("reading %q on %s: %v", key, s.srv.Kind, err)
	}
	defer out.Body.Close()
	var b bytes.Buffer
	_, _ = io.Copy(&b, out.Body)
	return b.String()
}
