package s3

import (
	"bytes"
	"context"
	"net"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

type contractCase struct {
	name string
	run  func(ctx context.Context, t *testing.T, s *store)
}

// contractCases run in order against each server. Each makes its own
// buckets (removed by store.bucket's cleanup), except "outage", which stops
// and restarts the server and so goes last.
var contractCases = []contractCase{
	{"health", func(ctx context.Context, t *testing.T, s *store) {
		_, err := s.c.ListBuckets(ctx)
		must(t, "ListBuckets", err)
		must(t, "Ping", s.c.Ping(ctx))
	}},

	{"ping asks for one bucket", pingContract},

	{"create twice", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		observedTable.Set(t, s.kind, rowCreate, "yes")
		err := s.c.CreateBucket(ctx, b, "")
		if s.expect.createOwnAgain == KindUnknown {
			answer(t, s, "CreateBucket own bucket again", err)
			must(t, "CreateBucket own bucket again", err)
			observedTable.Set(t, s.kind, rowCreateOwnAgain, "200 OK, as AWS in us-east-1")
		} else {
			wantKind(t, s, "CreateBucket own bucket again", err, s.expect.createOwnAgain)
			observedTable.Set(t, s.kind, rowCreateOwnAgain, answerCell(err))
		}
		names, err := s.c.ListBuckets(ctx)
		must(t, "ListBuckets", err)
		if !contains(names, b) {
			t.Errorf("ListBuckets %v lacks %s", names, b)
		}
		region, err := s.c.HeadBucket(ctx, b)
		must(t, "HeadBucket", err)
		t.Logf("ANSWER %s | HeadBucket region header | %q", s.kind, region)
	}},

	{"name taken by other identity", func(ctx context.Context, t *testing.T, s *store) {
		if s.srv.OtherAccessKeyID == "" {
			t.Fatalf("%s harness has no second identity", s.kind)
		}
		other, _ := s.client(t, func(c *Config) {
			c.AccessKeyID, c.SecretAccessKey, c.SessionToken = s.srv.OtherAccessKeyID, s.srv.OtherSecretAccessKey, s.srv.OtherSessionToken
		})
		b := s.bucket(t)
		must(t, "other CreateBucket", other.CreateBucket(ctx, b, ""))
		t.Cleanup(func() { _ = other.DeleteBucket(context.Background(), b) }) // runs before s.bucket's
		err := s.c.CreateBucket(ctx, b, "")
		wantKind(t, s, "CreateBucket of another identity's bucket", err, s.expect.createOthers)
		observedTable.Set(t, s.kind, rowCreateOthers, answerCell(err))
		_, err = s.c.HeadBucket(ctx, b)
		answer(t, s, "admin HeadBucket of another identity's bucket", err)
	}},

	// What an owner check before adoption could rely on: the owner a store reports for
	// the caller's own bucket, and for the second identity's. Recorded as each store
	// answers (expectations.owners), since they do not agree on what an owner is.
	{"bucket owners", func(ctx context.Context, t *testing.T, s *store) {
		mine := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, mine, ""))
		caller, err := s.c.CallerOwner(ctx)
		must(t, "CallerOwner", err)
		own, err := s.c.BucketOwner(ctx, mine)
		must(t, "BucketOwner of own bucket", err)
		t.Logf("ANSWER %s | owners | caller %q, own bucket %q", s.kind, caller, own)
		if s.srv.BucketOwnerID != "" && own != s.srv.BucketOwnerID {
			t.Errorf("own bucket's owner %q, the harness says buckets of these credentials are %q's", own, s.srv.BucketOwnerID)
		}
		other, _ := s.client(t, func(c *Config) {
			c.AccessKeyID, c.SecretAccessKey, c.SessionToken = s.srv.OtherAccessKeyID, s.srv.OtherSecretAccessKey, s.srv.OtherSessionToken
		})
		theirs := s.bucket(t)
		must(t, "other CreateBucket", other.CreateBucket(ctx, theirs, ""))
		t.Cleanup(func() { _ = other.DeleteBucket(context.Background(), theirs) }) // runs before s.bucket's
		others, err := s.c.BucketOwner(ctx, theirs)
		// Another account's bucket may well be closed to us (RGW: AccessDenied).
		if answer(t, s, "BucketOwner of another identity's bucket", err); err != nil && KindOf(err) != KindAccessDenied {
			t.Fatalf("BucketOwner of another identity's bucket: %v", err)
		}
		t.Logf("ANSWER %s | owners | another identity's bucket %q", s.kind, others)
		got := ownersByAccount
		switch {
		case own == "":
			got = ownersNone // no owner to compare with
		case own != caller:
			got = ownersNotComparable // the caller is not named as its buckets' owner is
		case err == nil && others == own:
			got = ownersSameAccount // the second identity's bucket is the caller's account's
		}
		if got != s.expect.owners {
			t.Errorf("owners: caller %q, own bucket %q, the other identity's %q: read as %q, want %q", caller, own, others, got, s.expect.owners)
		}
		if err == nil && own != "" && others == own && got != ownersSameAccount {
			t.Errorf("the two identities' buckets have one owner %q", own)
		}
		observedTable.Set(t, s.kind, rowOwners, got)
	}},

	{"missing bucket", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		_, err := s.c.HeadBucket(ctx, b)
		wantKind(t, s, "HeadBucket missing", err, KindNotFound)
		wantKind(t, s, "DeleteBucket missing", s.c.DeleteBucket(ctx, b), KindNotFound)
		tags, err := s.c.GetBucketTagging(ctx, b)
		if !s.expect.missingBucketUntagged {
			wantKind(t, s, "GetBucketTagging missing bucket", err, KindNotFound)
			observedTable.Set(t, s.kind, rowMissingTags, answerCell(err))
			return
		}
		// The client reads NoSuchTagSet as "no tags": only HeadBucket tells it is gone.
		answer(t, s, "GetBucketTagging missing bucket", err)
		if err != nil || len(tags) != 0 {
			t.Errorf("GetBucketTagging of a missing bucket: %v, %v; want no tags and no error (NoSuchTagSet)", tags, err)
		}
		observedTable.Set(t, s.kind, rowMissingTags, "`NoSuchTagSet` 404, read as a bucket without tags: only HeadBucket says it is missing")
	}},

	{"not empty", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		must(t, "PutObject", s.c.PutObject(ctx, b, "dir/obj", []byte("x")))
		wantKind(t, s, "DeleteBucket not empty", s.c.DeleteBucket(ctx, b), KindNotEmpty)
	}},

	{"wrong secret", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		bad, _ := s.client(t, func(c *Config) { c.SecretAccessKey = "wrong" + c.SecretAccessKey[5:] })
		_, err := bad.ListBuckets(ctx)
		wantKind(t, s, "ListBuckets wrong secret", err, KindInvalidCredentials)
		err = bad.Ping(ctx)
		wantKind(t, s, "Ping wrong secret", err, KindInvalidCredentials)
		s.wrongSecretPing = answerCell(err)
		_, err = bad.HeadBucket(ctx, b)
		wantKind(t, s, "HeadBucket wrong secret", err, KindInvalidCredentials)
	}},

	{"unknown access key", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		bad, _ := s.client(t, func(c *Config) { c.AccessKeyID = "AKIAUNKNOWNUNKNOWN00" })
		_, err := bad.ListBuckets(ctx)
		wantKind(t, s, "ListBuckets unknown key", err, KindInvalidCredentials)
		err = bad.Ping(ctx)
		wantKind(t, s, "Ping unknown key", err, KindInvalidCredentials)
		observedTable.Set(t, s.kind, rowHealthBadKeys, s.wrongSecretPing+", "+answerCell(err))
		_, err = bad.HeadBucket(ctx, b)
		wantKind(t, s, "HeadBucket unknown key", err, KindInvalidCredentials)
		_, err = bad.HeadBucket(ctx, b+"-missing")
		wantKind(t, s, "HeadBucket unknown key, missing bucket", err, KindInvalidCredentials)
	}},

	{"unreachable", func(ctx context.Context, t *testing.T, s *store) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, "listen", err)
		addr := l.Addr().String()
		_ = l.Close()
		c, _ := s.client(t, func(c *Config) { c.Endpoint = "http://" + addr })
		_, err = c.ListBuckets(ctx)
		wantKind(t, s, "ListBuckets closed port", err, KindUnreachable)
	}},

	{"timeout", func(ctx context.Context, t *testing.T, s *store) {
		tiny, cancel := context.WithTimeout(ctx, time.Microsecond)
		defer cancel()
		<-tiny.Done()
		_, err := s.c.ListBuckets(tiny)
		wantKind(t, s, "ListBuckets tiny deadline", err, KindTimeout)
		c, _ := s.client(t, func(c *Config) { c.RequestTimeout = time.Microsecond })
		_, err = c.HeadBucket(ctx, "whatever")
		wantKind(t, s, "HeadBucket tiny RequestTimeout", err, KindTimeout)
	}},

	{"tagging", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		tags, err := s.c.GetBucketTagging(ctx, b)
		if err != nil || tags == nil || len(tags) != 0 {
			t.Fatalf("fresh bucket tags = %v, %v; want empty map", tags, err)
		}
		want := map[string]string{"bucketkeeper.io/owner": "ns/name", "team": "storage", "empty": ""}
		must(t, "PutBucketTagging", s.c.PutBucketTagging(ctx, b, want))
		got, err := s.c.GetBucketTagging(ctx, b)
		must(t, "GetBucketTagging", err)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("tags = %v, want %v", got, want)
		}
		must(t, "PutBucketTagging(empty)", s.c.PutBucketTagging(ctx, b, nil))
		got, err = s.c.GetBucketTagging(ctx, b)
		if err != nil || len(got) != 0 {
			t.Errorf("after delete tags = %v, %v", got, err)
		}
		observedTable.Set(t, s.kind, rowTags, "yes")
	}},

	{"versioning", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		for _, want := range []VersioningStatus{VersioningOff, VersioningEnabled, VersioningSuspended, VersioningEnabled} {
			if want != VersioningOff {
				must(t, "PutBucketVersioning "+string(want), s.c.PutBucketVersioning(ctx, b, want))
			}
			got, err := s.c.GetBucketVersioning(ctx, b)
			must(t, "GetBucketVersioning", err)
			if got != want {
				t.Errorf("versioning = %q, want %q", got, want)
			}
		}
		observedTable.Set(t, s.kind, rowVersioning, "yes")
	}},

	{"lifecycle", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		rules := []LifecycleRule{
			{ID: "abort-uploads", AbortIncompleteMultipartUploadDays: i32(2)},
			{ID: "expire-logs", Prefix: "logs/", ExpirationDays: i32(30), NoncurrentVersionExpirationDays: i32(7)},
		}
		cell := "yes"
		if s.expect.abortUploadsDropped {
			cell = abortUploadsContract(ctx, t, s, b, rules)
			rules = rules[1:]
		}
		err := s.c.PutBucketLifecycle(ctx, b, rules)
		if s.expect.lifecycle != KindUnknown {
			wantKind(t, s, "PutBucketLifecycleConfiguration", err, s.expect.lifecycle)
			observedTable.Set(t, s.kind, rowLifecycle, answerCell(err))
			_, err = s.c.GetBucketLifecycle(ctx, b)
			answer(t, s, "GetBucketLifecycleConfiguration (unsupported)", err)
			return
		}
		must(t, "PutBucketLifecycle", err)
		got, err := s.c.GetBucketLifecycle(ctx, b)
		must(t, "GetBucketLifecycle", err)
		if !reflect.DeepEqual(got, rules) {
			t.Errorf("lifecycle read back\n got  %s\n want %s", fmtRules(got), fmtRules(rules))
		}
		must(t, "PutBucketLifecycle(none)", s.c.PutBucketLifecycle(ctx, b, nil))
		if got, err := s.c.GetBucketLifecycle(ctx, b); got != nil || err != nil {
			t.Errorf("after delete: %v, %v", got, err)
		}
		observedTable.Set(t, s.kind, rowLifecycle, cell)
	}},

	{"public access block", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		pab, err := s.c.GetPublicAccessBlock(ctx, b)
		answer(t, s, "GetPublicAccessBlock fresh bucket", err)
		want := PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: false}
		if s.expect.publicAccessBlock != KindUnknown {
			publicAccessBlockMissing(ctx, t, s, b, err, want)
			return
		}
		err = s.c.PutPublicAccessBlock(ctx, b, want)
		if pab != nil {
			t.Errorf("fresh bucket has a public access block %+v", *pab)
		}
		must(t, "PutPublicAccessBlock", err)
		pab, err = s.c.GetPublicAccessBlock(ctx, b)
		must(t, "GetPublicAccessBlock", err)
		if pab == nil || *pab != want {
			t.Errorf("public access block = %+v, want %+v", pab, want)
		}
		must(t, "DeletePublicAccessBlock", s.c.DeletePublicAccessBlock(ctx, b))
		if pab, err := s.c.GetPublicAccessBlock(ctx, b); pab != nil || err != nil {
			t.Errorf("after delete: %+v, %v", pab, err)
		}
		observedTable.Set(t, s.kind, rowPublicAccessBlock, "yes")
	}},

	{"policy", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		if p, err := s.c.GetBucketPolicy(ctx, b); p != "" || err != nil {
			t.Fatalf("fresh bucket policy = %q, %v", p, err)
		}
		policy := `{"Version":"2012-10-17","Statement":[{"Sid":"PublicRead","Effect":"Allow",` +
			`"Principal":{"AWS":["*"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + b + `/*"]}]}`
		must(t, "PutBucketPolicy", s.c.PutBucketPolicy(ctx, b, policy))
		got, err := s.c.GetBucketPolicy(ctx, b)
		must(t, "GetBucketPolicy", err)
		if same, err := EquivalentPolicies(got, policy); err != nil || !same {
			t.Errorf("policy = %s\nwant %s", got, policy)
		}
		wantKind(t, s, "PutBucketPolicy malformed", s.c.PutBucketPolicy(ctx, b, `{"Version":`), KindInvalid)
		must(t, "DeleteBucketPolicy", s.c.DeleteBucketPolicy(ctx, b))
		if p, err := s.c.GetBucketPolicy(ctx, b); p != "" || err != nil {
			t.Errorf("after delete: %q, %v", p, err)
		}
		observedTable.Set(t, s.kind, rowPolicy, "yes")
	}},

	{"cors", corsContract},

	{"canary", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		body := []byte("bucketkeeper canary " + time.Now().UTC().Format(time.RFC3339Nano))
		must(t, "PutObject", s.c.PutObject(ctx, b, ".bucketkeeper/canary", body))
		got, err := s.c.GetObject(ctx, b, ".bucketkeeper/canary", 1024)
		must(t, "GetObject", err)
		if !bytes.Equal(got, body) {
			t.Errorf("canary = %q, want %q", got, body)
		}
		_, err = s.c.GetObject(ctx, b, ".bucketkeeper/canary", 4)
		wantKind(t, s, "GetObject over the limit", err, KindInvalid)
		must(t, "DeleteObject", s.c.DeleteObject(ctx, b, ".bucketkeeper/canary"))
		_, err = s.c.GetObject(ctx, b, ".bucketkeeper/canary", 1024)
		wantKind(t, s, "GetObject deleted", err, KindNotFound)
		must(t, "DeleteObject again", s.c.DeleteObject(ctx, b, ".bucketkeeper/canary"))
	}},

	{"object versions", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		must(t, "PutBucketVersioning", s.c.PutBucketVersioning(ctx, b, VersioningEnabled))
		for _, k := range []string{"a", "a", "b/c", "d"} {
			must(t, "PutObject "+k, s.c.PutObject(ctx, b, k, []byte(k)))
		}
		must(t, "DeleteObject a (marker)", s.c.DeleteObject(ctx, b, "a"))
		var all []ObjectVersion
		var page *PageToken
		for range 10 {
			res, err := s.c.ListObjectVersions(ctx, b, page)
			must(t, "ListObjectVersions", err)
			all = append(all, res.Versions...)
			if page = res.Next; page == nil {
				break
			}
		}
		var summary []string
		for _, v := range all {
			kind := "v"
			if v.IsDeleteMarker {
				kind = "m"
			}
			summary = append(summary, v.Key+":"+kind)
			if v.VersionID == "" {
				t.Errorf("entry %+v has no version ID", v)
			}
		}
		sort.Strings(summary)
		if got := strings.Join(summary, " "); got != "a:m a:v a:v b/c:v d:v" {
			t.Errorf("versions = %s, want a:m a:v a:v b/c:v d:v", got)
		}
		wantKind(t, s, "DeleteBucket with versions", s.c.DeleteBucket(ctx, b), KindNotEmpty)
		writes := s.obs.count(true)
		must(t, "emptyBucket", emptyBucket(ctx, s.c, b))
		if n := s.obs.count(true) - writes; n != 1 {
			t.Errorf("emptying took %d DeleteObjects calls, want 1", n)
		}
		res, err := s.c.ListObjectVersions(ctx, b, nil)
		if err != nil || len(res.Versions) != 0 {
			t.Errorf("after emptying: %+v, %v", res, err)
		}
		must(t, "DeleteBucket", s.c.DeleteBucket(ctx, b))
		observedTable.Set(t, s.kind, rowVersions, "yes")
	}},

	{"multipart uploads", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		page, err := s.c.ListMultipartUploads(ctx, b, nil)
		must(t, "ListMultipartUploads of a new bucket", err)
		if len(page.Uploads) != 0 || page.Next != nil {
			t.Errorf("new bucket lists uploads: %+v", page)
		}
		// The operator never starts uploads; the SDK underneath the client does.
		api := s.c.(*client).api
		var started []string
		for _, key := range []string{"big/one", "big/two"} {
			out, err := api.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String(key)})
			must(t, "CreateMultipartUpload "+key, err)
			started = append(started, key+"@"+aws.ToString(out.UploadId))
		}
		page, err = s.c.ListMultipartUploads(ctx, b, nil)
		must(t, "ListMultipartUploads", err)
		var listed []string
		for _, u := range page.Uploads {
			listed = append(listed, u.Key+"@"+u.UploadID)
		}
		sort.Strings(listed)
		if !reflect.DeepEqual(listed, started) {
			t.Errorf("listed uploads %v, want %v", listed, started)
		}
		for _, u := range page.Uploads {
			must(t, "AbortMultipartUpload "+u.Key, s.c.AbortMultipartUpload(ctx, b, u.Key, u.UploadID))
		}
		page, err = s.c.ListMultipartUploads(ctx, b, nil)
		must(t, "ListMultipartUploads after aborting", err)
		if len(page.Uploads) != 0 {
			t.Errorf("uploads left after aborting: %+v", page.Uploads)
		}
		// Aborting an upload that is gone is not a failure (a purge pass may repeat).
		err = s.c.AbortMultipartUpload(ctx, b, "big/one", strings.Split(started[0], "@")[1])
		answer(t, s, "AbortMultipartUpload of an aborted upload", err)
		must(t, "AbortMultipartUpload again", err)
		must(t, "DeleteBucket", s.c.DeleteBucket(ctx, b))
		observedTable.Set(t, s.kind, rowUploads, "yes")
	}},

	{"object data plane", objectDataContract},

	{"object lock", lockContract},

	{"steady state only reads", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		c, obs := s.client(t, nil)
		_, err := c.HeadBucket(ctx, b)
		must(t, "HeadBucket", err)
		_, err = c.GetBucketTagging(ctx, b)
		must(t, "GetBucketTagging", err)
		_, err = c.GetBucketVersioning(ctx, b)
		must(t, "GetBucketVersioning", err)
		_, err = c.GetBucketPolicy(ctx, b)
		must(t, "GetBucketPolicy", err)
		if w, r := obs.count(true), obs.count(false); w != 0 || r != 4 {
			t.Errorf("observer: %d writes, %d reads; want 0 and 4 (%+v)", w, r, obs.all())
		}
	}},

	{"outage", func(ctx context.Context, t *testing.T, s *store) {
		b := s.bucket(t)
		must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
		must(t, "Stop", s.srv.Stop())
		_, err := s.c.HeadBucket(ctx, b)
		wantKind(t, s, "HeadBucket while stopped", err, KindUnreachable)
		must(t, "Start", s.srv.Start())
		_, err = s.c.HeadBucket(ctx, b) // pooled connections are dead now
		must(t, "HeadBucket after restart", err)
		observedTable.Set(t, s.kind, rowOutage, "yes")
	}},
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
