package storagebucket

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// specCORS is a claim's CORS: a rule with every field, then a minimal one.
var specCORS = []bkv1.CORSRule{
	{ID: "app", AllowedOrigins: []string{"https://app.example.com", "https://*.example.org"},
		AllowedMethods: []bkv1.CORSMethod{bkv1.CORSMethodGet, bkv1.CORSMethodPut},
		AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: ptr.To[int32](3000)},
	{AllowedOrigins: []string{"*"}, AllowedMethods: []bkv1.CORSMethod{bkv1.CORSMethodHead}},
}

// storeCORS is specCORS as the store is sent it.
var storeCORS = []s3.CORSRule{
	{ID: "app", AllowedOrigins: []string{"https://app.example.com", "https://*.example.org"}, AllowedMethods: []string{"GET", "PUT"},
		AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: ptr.To[int32](3000)},
	{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"HEAD"}},
}

// foreignCORS is a CORS configuration someone else put on a bucket.
var foreignCORS = []s3.CORSRule{{ID: "legacy", AllowedOrigins: []string{"https://old.example.com"}, AllowedMethods: []string{"GET"}}}

// corsPass runs one configuration pass over the fake store and returns its error.
func corsPass(t *testing.T, sb *bkv1.StorageBucket, f *fakeS3) error {
	t.Helper()
	r := &Reconciler{Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakePassiveClock(time.Now()), SyncInterval: time.Hour}
	scope := &bucketScope{sb: sb, owner: testOwner(sb), store: &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store", UID: "s1", Generation: 1}},
		s3: f, bucket: "b", syncing: true, created: true, policy: acceptedPolicy(t, sb)}
	return r.reconcileConfiguration(t.Context(), scope)
}

func corsWrites(f *fakeS3) []string {
	var out []string
	for _, w := range f.writes {
		if strings.Contains(w, "Cors") {
			out = append(out, w)
		}
	}
	return out
}

// TestCORSApplied: the spec's rules are written in their order, and a bucket that holds
// them (its lists in another order, as a store may keep them) is not written again.
func TestCORSApplied(t *testing.T) {
	sb := newSpecBucket()
	sb.Spec.CORS = specCORS
	f := &fakeS3{}
	if err := corsPass(t, sb, f); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.cors, storeCORS) {
		t.Errorf("CORS on the store = %+v, want %+v", f.cors, storeCORS)
	}
	if got := corsWrites(f); !slices.Equal(got, []string{"PutBucketCors"}) {
		t.Errorf("CORS writes = %v, want one PutBucketCors", got)
	}
	c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionConfigured)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "CORS") {
		t.Errorf("Configured = %+v, want True naming CORS", c)
	}
	f.cors[0].AllowedOrigins = []string{"https://*.example.org", "https://app.example.com"}
	f.cors[0].AllowedMethods = []string{"PUT", "GET"}
	f.writes = nil
	if err := corsPass(t, sb, f); err != nil || len(f.writes) != 0 {
		t.Errorf("a store holding the spec's CORS in another list order: writes %v, %v", f.writes, err)
	}
}

// TestCORSDriftCorrected: a CORS configuration changed on the store is put back; one
// with its rules swapped is drift too (the first rule that matches answers).
func TestCORSDriftCorrected(t *testing.T) {
	for name, drift := range map[string][]s3.CORSRule{
		"an origin added":    {{ID: "app", AllowedOrigins: []string{"https://app.example.com", "https://*.example.org", "https://evil.example"}, AllowedMethods: []string{"GET", "PUT"}, AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: ptr.To[int32](3000)}, storeCORS[1]},
		"a max age changed":  {{ID: "app", AllowedOrigins: storeCORS[0].AllowedOrigins, AllowedMethods: []string{"GET", "PUT"}, AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: ptr.To[int32](1)}, storeCORS[1]},
		"the rules swapped":  {storeCORS[1], storeCORS[0]},
		"a rule removed":     storeCORS[:1],
		"the whole replaced": foreignCORS,
		"deleted":            nil,
	} {
		t.Run(name, func(t *testing.T) {
			sb := newSpecBucket()
			sb.Spec.CORS = specCORS
			f := &fakeS3{cors: drift}
			if err := corsPass(t, sb, f); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.cors, storeCORS) || !slices.Equal(corsWrites(f), []string{"PutBucketCors"}) {
				t.Errorf("after the pass: CORS %+v (writes %v), want %+v", f.cors, corsWrites(f), storeCORS)
			}
		})
	}
}

// TestCORSRemoval is the rule of absent settings for CORS: the spec dropping it deletes
// a configuration the operator set (on a bucket it created, or recorded in
// status.applied on an adopted one) and leaves alone, unread, one it never set.
func TestCORSRemoval(t *testing.T) {
	t.Run("created bucket: a CORS the spec does not name is removed", func(t *testing.T) {
		sb := newSpecBucket()
		f := &fakeS3{cors: foreignCORS}
		if err := corsPass(t, sb, f); err != nil {
			t.Fatal(err)
		}
		if f.cors != nil || !slices.Equal(corsWrites(f), []string{"DeleteBucketCors"}) {
			t.Errorf("CORS %+v, writes %v; want it deleted", f.cors, corsWrites(f))
		}
		if sb.Status.Applied != nil && sb.Status.Applied.CORS {
			t.Errorf("a created bucket's CORS recorded in status.applied: %+v", sb.Status.Applied)
		}
	})
	t.Run("adopted bucket: a CORS found on it is left alone and unread", func(t *testing.T) {
		sb := adoptedBucket(nil)
		f := &fakeS3{cors: foreignCORS}
		if err := corsPass(t, sb, f); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(f.reads, "GetBucketCors") || len(corsWrites(f)) != 0 || !reflect.DeepEqual(f.cors, foreignCORS) {
			t.Errorf("reads %v, writes %v, CORS %+v; want the foreign CORS untouched and unread", f.reads, corsWrites(f), f.cors)
		}
	})
	t.Run("adopted bucket: the spec's CORS replaces it and is recorded, then dropping it deletes it", func(t *testing.T) {
		sb := adoptedBucket(nil)
		sb.Spec.CORS = specCORS
		f := &fakeS3{cors: foreignCORS}
		if err := corsPass(t, sb, f); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.cors, storeCORS) || sb.Status.Applied == nil || !sb.Status.Applied.CORS {
			t.Fatalf("CORS %+v, status.applied %+v; want the spec's, recorded", f.cors, sb.Status.Applied)
		}
		sb.Spec.CORS = nil
		f.writes = nil
		if err := corsPass(t, sb, f); err != nil {
			t.Fatal(err)
		}
		if f.cors != nil || !slices.Equal(corsWrites(f), []string{"DeleteBucketCors"}) {
			t.Errorf("CORS %+v, writes %v; want the operator's deleted", f.cors, corsWrites(f))
		}
		if sb.Status.Applied != nil && sb.Status.Applied.CORS {
			t.Errorf("status.applied still records CORS: %+v", sb.Status.Applied)
		}
		f.writes, f.reads = nil, nil
		if err := corsPass(t, sb, f); err != nil || slices.Contains(f.reads, "GetBucketCors") || len(f.writes) != 0 {
			t.Errorf("after the removal: reads %v, writes %v, %v; want CORS no longer read", f.reads, f.writes, err)
		}
	})
}

// TestCORSNotSupportedByStore: a store without bucket CORS (its GET answers
// NotImplemented, or its GET reads "none" and its PUT NotImplemented) makes a claim that
// asks for CORS NotSupportedByStore, naming it, with the other settings applied and no
// CORS write beyond the refused PUT; a claim that asks for none is Configured there.
func TestCORSNotSupportedByStore(t *testing.T) {
	for name, tc := range map[string]struct {
		errs       map[string]error
		wantWrites []string
	}{
		"GET refused": {errs: map[string]error{"GetBucketCors": notImplemented("GetBucketCors")}},
		"PUT refused": {errs: map[string]error{"PutBucketCors": notImplemented("PutBucketCors")}, wantWrites: []string{"PutBucketCors"}},
	} {
		t.Run(name, func(t *testing.T) {
			sb := newSpecBucket()
			sb.Spec.CORS = specCORS
			sb.Spec.Tags = map[string]string{"team": "a"}
			f := &fakeS3{errs: tc.errs}
			err := corsPass(t, sb, f)
			se := reconcile.AsStepError(err, "")
			if err == nil || se.Reason != bkv1.ReasonNotSupportedByStore || !se.Terminal || !strings.Contains(se.Message, "does not support CORS") {
				t.Fatalf("error = %v (%+v), want a terminal NotSupportedByStore naming CORS", err, se)
			}
			if f.tags["team"] != "a" || f.pab == nil {
				t.Errorf("the other settings were not applied: tags %v, public access block %v", f.tags, f.pab)
			}
			if got := corsWrites(f); !slices.Equal(got, tc.wantWrites) || f.cors != nil {
				t.Errorf("CORS writes %v, CORS %+v; want %v and nothing kept", got, f.cors, tc.wantWrites)
			}
		})
	}
	t.Run("none asked", func(t *testing.T) {
		sb := newSpecBucket()
		f := &fakeS3{errs: map[string]error{"GetBucketCors": notImplemented("GetBucketCors")}}
		if err := corsPass(t, sb, f); err != nil {
			t.Fatalf("a claim without CORS on a store without it: %v", err)
		}
		if got := corsWrites(f); len(got) != 0 {
			t.Errorf("CORS writes %v to a store without CORS", got)
		}
	})
}

// TestCORSReadDeniedWithNoneAsked: an operator whose identity may not read CORS (a
// policy written before the CORS actions) still configures a claim that asks for none;
// one that asks for CORS reports the refusal.
func TestCORSReadDeniedWithNoneAsked(t *testing.T) {
	denied := map[string]error{"GetBucketCors": s3Err("GetBucketCors", s3.KindAccessDenied)}
	sb := newSpecBucket()
	f := &fakeS3{errs: denied}
	if err := corsPass(t, sb, f); err != nil {
		t.Fatalf("a claim without CORS, the CORS read denied: %v", err)
	}
	if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionConfigured); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Configured = %+v, want True", c)
	}
	sb = newSpecBucket()
	sb.Spec.CORS = specCORS
	f = &fakeS3{errs: denied}
	if err := corsPass(t, sb, f); err == nil || !strings.Contains(err.Error(), "CORS") {
		t.Errorf("a claim with CORS, the CORS read denied: %v, want an error naming CORS", err)
	}
}
