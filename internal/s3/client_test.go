package s3

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCreateBucketLocationConstraint(t *testing.T) {
	for region, want := range map[string]string{"": "", "us-east-1": "", "eu-west-3": "eu-west-3"} {
		t.Run("region="+region, func(t *testing.T) {
			var body []byte
			c, _ := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ = io.ReadAll(r.Body)
				if r.Method != http.MethodPut || r.URL.Path != "/b1" {
					t.Errorf("got %s %s", r.Method, r.URL.Path)
				}
			})
			if err := c.CreateBucket(testCtx(t), "b1", region); err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				LocationConstraint string
			}
			if len(body) > 0 {
				if err := xml.Unmarshal(body, &cfg); err != nil {
					t.Fatalf("body %q: %v", body, err)
				}
			}
			if cfg.LocationConstraint != want {
				t.Errorf("LocationConstraint = %q, want %q (body %q)", cfg.LocationConstraint, want, body)
			}
		})
	}
}

// TestAbsentConfigurationIsEmpty: every "no such configuration" answer is
// an empty result, not an error.
func TestAbsentConfigurationIsEmpty(t *testing.T) {
	codes := map[string]string{
		"tagging": "NoSuchTagSet", "policy": "NoSuchBucketPolicy",
		"lifecycle": "NoSuchLifecycleConfiguration", "publicAccessBlock": "NoSuchPublicAccessBlockConfiguration",
		"cors": "NoSuchCORSConfiguration",
	}
	handler := func(tagCode string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for sub, code := range codes {
				if r.URL.Query().Has(sub) {
					if sub == "tagging" {
						code = tagCode
					}
					writeS3Error(w, r, 404, code, "none")
					return
				}
			}
			if r.URL.Query().Has("versioning") {
				writeXML(w, `<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>`)
				return
			}
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	}
	for _, tagCode := range []string{"NoSuchTagSet", "NoSuchTagSetError"} {
		c, _ := fakeServer(t, handler(tagCode))
		ctx := testCtx(t)
		tags, err := c.GetBucketTagging(ctx, "b")
		if err != nil || tags == nil || len(tags) != 0 {
			t.Errorf("%s: GetBucketTagging = %#v, %v; want empty map", tagCode, tags, err)
		}
		if p, err := c.GetBucketPolicy(ctx, "b"); p != "" || err != nil {
			t.Errorf("GetBucketPolicy = %q, %v", p, err)
		}
		if lc, err := c.GetBucketLifecycle(ctx, "b"); lc != nil || err != nil {
			t.Errorf("GetBucketLifecycle = %v, %v", lc, err)
		}
		if pab, err := c.GetPublicAccessBlock(ctx, "b"); pab != nil || err != nil {
			t.Errorf("GetPublicAccessBlock = %v, %v", pab, err)
		}
		if rules, err := c.GetBucketCors(ctx, "b"); rules != nil || err != nil {
			t.Errorf("GetBucketCors = %v, %v", rules, err)
		}
		if v, err := c.GetBucketVersioning(ctx, "b"); v != VersioningOff || err != nil {
			t.Errorf("GetBucketVersioning = %q, %v", v, err)
		}
	}
}

// TestLifecycleNormalisation: the legacy Prefix form, And filters, zero
// days, disabled rules and unsorted IDs all read back in one normal form.
func TestLifecycleNormalisation(t *testing.T) {
	c, _ := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeXML(w, `<LifecycleConfiguration>
<Rule><ID>z-legacy</ID><Prefix>logs/</Prefix><Status>Enabled</Status><Expiration><Days>7</Days></Expiration></Rule>
<Rule><ID>m-and</ID><Filter><And><Prefix>tmp/</Prefix><Tag><Key>a</Key><Value>b</Value></Tag></And></Filter><Status>Enabled</Status>
  <NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration>
  <Expiration><Days>0</Days></Expiration></Rule>
<Rule><ID>off</ID><Filter><Prefix></Prefix></Filter><Status>Disabled</Status><Expiration><Days>1</Days></Expiration></Rule>
<Rule><ID>a-filter</ID><Filter><Prefix></Prefix></Filter><Status>Enabled</Status>
  <AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>
</LifecycleConfiguration>`)
	})
	got, err := c.GetBucketLifecycle(testCtx(t), "b")
	if err != nil {
		t.Fatal(err)
	}
	want := []LifecycleRule{
		{ID: "a-filter", AbortIncompleteMultipartUploadDays: i32(2)},
		{ID: "m-and", Prefix: "tmp/", NoncurrentVersionExpirationDays: i32(3)},
		{ID: "off", Disabled: true, ExpirationDays: i32(1)},
		{ID: "z-legacy", Prefix: "logs/", ExpirationDays: i32(7)},
	}
	// The tag filter of m-and is not modelled: that rule keeps its store form.
	for i := range got {
		if got[i].Verbatim() != (got[i].ID == "m-and") {
			t.Errorf("rule %s: Verbatim() = %v", got[i].ID, got[i].Verbatim())
		}
		got[i].verbatim = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %s\nwant %s", fmtRules(got), fmtRules(want))
	}
}

// TestLifecycleKeepsUnmodelledRules: a rule read with parts the fields do not
// model (a transition, a tag filter) is written back exactly as read, next to
// a rule built from fields, and a disabled rule stays disabled.
func TestLifecycleKeepsUnmodelledRules(t *testing.T) {
	const stored = `<LifecycleConfiguration>
<Rule><ID>archive</ID><Filter><Tag><Key>class</Key><Value>cold</Value></Tag></Filter><Status>Enabled</Status>
  <Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition></Rule>
<Rule><ID>paused</ID><Filter><Prefix>old/</Prefix></Filter><Status>Disabled</Status><Expiration><Days>9</Days></Expiration></Rule>
</LifecycleConfiguration>`
	var put []byte
	c, _ := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			put, _ = io.ReadAll(r.Body)
			return
		}
		writeXML(w, stored)
	})
	ctx := testCtx(t)
	rules, err := c.GetBucketLifecycle(ctx, "b")
	if err != nil || len(rules) != 2 {
		t.Fatalf("GetBucketLifecycle = %s, %v", fmtRules(rules), err)
	}
	rules = append(rules, LifecycleRule{ID: "mine", Prefix: "tmp/", ExpirationDays: i32(1)})
	if err := c.PutBucketLifecycle(ctx, "b", rules); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Rules []struct {
			ID     string
			Status string
			Filter struct {
				Prefix *string
				Tag    *struct{ Key, Value string }
			}
			Transition *struct {
				Days         int
				StorageClass string
			}
			Expiration *struct{ Days int }
		} `xml:"Rule"`
	}
	if err := xml.Unmarshal(put, &sent); err != nil {
		t.Fatalf("body %q: %v", put, err)
	}
	if len(sent.Rules) != 3 {
		t.Fatalf("sent %d rules: %s", len(sent.Rules), put)
	}
	archive, paused, mine := sent.Rules[0], sent.Rules[1], sent.Rules[2]
	if archive.ID != "archive" || archive.Status != "Enabled" || archive.Filter.Tag == nil || archive.Filter.Tag.Value != "cold" ||
		archive.Transition == nil || archive.Transition.Days != 30 || archive.Transition.StorageClass != "GLACIER" {
		t.Errorf("the unmodelled rule was altered: %s", put)
	}
	if paused.ID != "paused" || paused.Status != "Disabled" || paused.Expiration == nil || paused.Expiration.Days != 9 {
		t.Errorf("the disabled rule was altered: %s", put)
	}
	if mine.ID != "mine" || mine.Status != "Enabled" || mine.Filter.Prefix == nil || *mine.Filter.Prefix != "tmp/" {
		t.Errorf("the rule built from fields: %s", put)
	}
}

func fmtRules(rules []LifecycleRule) string {
	d := func(p *int32) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	var parts []string
	for _, r := range rules {
		parts = append(parts, fmt.Sprintf("{%s %q exp=%s nc=%s abort=%s}", r.ID, r.Prefix,
			d(r.ExpirationDays), d(r.NoncurrentVersionExpirationDays), d(r.AbortIncompleteMultipartUploadDays)))
	}
	return strings.Join(parts, " ")
}

// TestDeleteObjectsBatches: batches of at most 1000 keys, each with a valid
// Content-MD5; per-key failures aggregate; missing keys are not failures.
func TestDeleteObjectsBatches(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	c, obs := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum := md5.Sum(body) //nolint:gosec
		if got, want := r.Header.Get("Content-MD5"), base64.StdEncoding.EncodeToString(sum[:]); got != want {
			t.Errorf("Content-MD5 = %q, want %q", got, want)
		}
		var req struct {
			Quiet  bool
			Object []struct{ Key, VersionId string }
		}
		if err := xml.Unmarshal(body, &req); err != nil {
			t.Errorf("body: %v", err)
		}
		mu.Lock()
		sizes = append(sizes, len(req.Object))
		mu.Unlock()
		if !req.Quiet {
			t.Error("want Quiet mode")
		}
		var errs strings.Builder
		for _, o := range req.Object {
			switch o.Key {
			case "locked-0001", "locked-2400":
				fmt.Fprintf(&errs, "<Error><Key>%s</Key><VersionId>%s</VersionId><Code>AccessDenied</Code><Message>no</Message></Error>", o.Key, o.VersionId)
			case "gone":
				fmt.Fprintf(&errs, "<Error><Key>%s</Key><Code>NoSuchKey</Code><Message>gone</Message></Error>", o.Key)
			}
		}
		writeXML(w, "<DeleteResult>"+errs.String()+"</DeleteResult>")
	})
	var objs []ObjectID
	for i := range 2500 {
		key := fmt.Sprintf("obj-%04d", i)
		switch i {
		case 1, 2400:
			key = fmt.Sprintf("locked-%04d", i)
		case 7:
			key = "gone"
		}
		objs = append(objs, ObjectID{Key: key, VersionID: "v1"})
	}
	err := c.DeleteObjects(testCtx(t), "b", objs)
	if !reflect.DeepEqual(sizes, []int{1000, 1000, 500}) {
		t.Errorf("batch sizes = %v", sizes)
	}
	var de *DeleteObjectsError
	if !errors.As(err, &de) || len(de.Failed) != 2 || de.Total != 2500 {
		t.Fatalf("want 2 aggregated failures of 2500, got %v", err)
	}
	if de.Failed[1] != (ObjectError{Key: "locked-2400", VersionID: "v1", Code: "AccessDenied", Message: "no"}) {
		t.Errorf("failure = %+v", de.Failed[1])
	}
	if KindOf(err) != KindAccessDenied {
		t.Errorf("KindOf = %v, want AccessDenied", KindOf(err))
	}
	if !strings.Contains(err.Error(), "locked-0001") || !strings.Contains(err.Error(), "2 of 2500") {
		t.Errorf("message %q", err)
	}
	if n := obs.count(true); n != 3 {
		t.Errorf("observer saw %d mutating calls, want 3", n)
	}
	if err := c.DeleteObjects(testCtx(t), "b", nil); err != nil || len(sizes) != 3 {
		t.Errorf("empty delete made a request or failed: %v", err)
	}
}

// TestListObjectVersionsFallback: a store answering 501 to ?versions is
// listed with ListObjectsV2, page after page.
func TestListObjectVersionsFallback(t *testing.T) {
	c, obs := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case q.Has("versions"):
			writeS3Error(w, r, 501, "NotImplemented", "no versions")
		case q.Get("list-type") == "2" && q.Get("continuation-token") == "":
			writeXML(w, `<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken>
<Contents><Key>a</Key></Contents><Contents><Key>b</Key></Contents></ListBucketResult>`)
		case q.Get("list-type") == "2" && q.Get("continuation-token") == "t2":
			writeXML(w, `<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>c</Key></Contents></ListBucketResult>`)
		default:
			t.Errorf("unexpected %s", r.URL)
		}
	})
	ctx := testCtx(t)
	var keys []string
	var page *PageToken
	for i := 0; ; i++ {
		res, err := c.ListObjectVersions(ctx, "b", page)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Versions {
			if v.VersionID != "" || v.IsDeleteMarker {
				t.Errorf("fallback entry %+v", v)
			}
			keys = append(keys, v.Key)
		}
		if page = res.Next; page == nil || i > 3 {
			break
		}
	}
	if strings.Join(keys, ",") != "a,b,c" {
		t.Errorf("keys = %v", keys)
	}
	if n := len(obs.all()); n != 3 {
		t.Errorf("requests = %d, want 3 (one 501, two lists)", n)
	}
}

func TestGetObjectSizeLimit(t *testing.T) {
	c, _ := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 100))
	})
	ctx := testCtx(t)
	if b, err := c.GetObject(ctx, "b", "k", 100); err != nil || len(b) != 100 {
		t.Fatalf("GetObject(100) = %d bytes, %v", len(b), err)
	}
	_, err := c.GetObject(ctx, "b", "k", 99)
	if !errors.Is(err, ErrObjectTooLarge) || KindOf(err) != KindInvalid || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("GetObject(99) error = %v", err)
	}
}

// TestRateLimitAndObserver: the token bucket paces every request and the
// observer sees each with its operation and status.
func TestRateLimitAndObserver(t *testing.T) {
	c, obs := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
		default:
			writeXML(w, `<ListAllMyBucketsResult><Buckets></Buckets></ListAllMyBucketsResult>`)
		}
	}, func(cfg *Config) { cfg.RequestsPerSecond = 20; cfg.Burst = 1 })
	ctx := testCtx(t)
	start := time.Now()
	for range 3 {
		if _, err := c.ListBuckets(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.PutBucketTagging(ctx, "b", map[string]string{"k": "v"}); err != nil {
			t.Fatal(err)
		}
	}
	// 6 requests at 20/s with burst 1: at least 5 waits of 50ms.
	if d := time.Since(start); d < 240*time.Millisecond {
		t.Errorf("6 requests took %v, want >= 250ms", d)
	}
	if r, w := obs.count(false), obs.count(true); r != 3 || w != 3 {
		t.Errorf("observer: %d reads, %d writes; want 3 and 3", r, w)
	}
	for _, o := range obs.all() {
		if o.status != 200 || o.err != nil {
			t.Errorf("observation %+v", o)
		}
	}

	// A deadline shorter than the wait for a token is a Timeout.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, _ = c.ListBuckets(ctx) // take the token
	if _, err := c.ListBuckets(short); KindOf(err) != KindTimeout {
		t.Errorf("KindOf = %v, want Timeout (err: %v)", KindOf(err), err)
	}
}

func TestIsMutating(t *testing.T) {
	for op, want := range map[string]bool{
		"CreateBucket": true, "PutBucketTagging": true, "DeleteObjects": true, "DeleteBucketLifecycle": true,
		"PutPublicAccessBlock": true, "ListBuckets": false, "HeadBucket": false, "GetObject": false,
		"GetBucketLifecycleConfiguration": false, "ListObjectVersions": false, "ListObjectsV2": false,
	} {
		if IsMutating(op) != want {
			t.Errorf("IsMutating(%q) = %v", op, !want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	ctx := context.Background()
	for name, cfg := range map[string]Config{
		"relative endpoint": {Endpoint: "s3.local:9000", AccessKeyID: "a", SecretAccessKey: "b"},
		"ftp endpoint":      {Endpoint: "ftp://x", AccessKeyID: "a", SecretAccessKey: "b"},
		"secret only":       {SecretAccessKey: "b"},
		"negative rate":     {AccessKeyID: "a", SecretAccessKey: "b", RequestsPerSecond: -1},
	} {
		if _, err := New(ctx, cfg); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	// The default chain (no static keys) builds without network access.
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	if _, err := New(ctx, Config{Endpoint: "http://127.0.0.1:1"}); err != nil {
		t.Errorf("default chain: %v", err)
	}
	// A Factory is just New.
	var f Factory = New
	if _, err := f(ctx, Config{AccessKeyID: "a", SecretAccessKey: "b"}); err != nil {
		t.Errorf("factory: %v", err)
	}
	if err := (&client{}).PutBucketVersioning(ctx, "b", VersioningOff); KindOf(err) != KindInvalid {
		t.Errorf("PutBucketVersioning(off) = %v, want Invalid", err)
	}
}
