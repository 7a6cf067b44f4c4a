package integration_test

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/receiver"
)

// receiverKey is a namespaced key of the probe webhook as the platform team writes it.
type receiverKey struct {
	id     string
	secret []byte
}

// createReceiverKey writes a key Secret into the receiver's keys namespace naming
// namespaces (the annotation's value, verbatim); mutate may spoil it.
func createReceiverKey(t *testing.T, f *fixture, id, namespaces string, mutate ...func(*corev1.Secret)) receiverKey {
	t.Helper()
	k := receiverKey{id: id, secret: []byte("hmac-of-" + id + "-0123456789")}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: receiverKeysNamespace, Name: id,
			Labels:      map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleReceiverKey},
			Annotations: map[string]string{bkv1.AnnotationReceiverNamespaces: namespaces}},
		Data: map[string][]byte{bkv1.ReceiverKeySecretKey: append(bytes.Clone(k.secret), '\n')},
	}
	for _, m := range mutate {
		m(s)
	}
	must(t, k8s.Create(f.ctx, s))
	t.Cleanup(func() { _ = k8s.Delete(f.ctx, s) })
	return k
}

// webhookAnswer is what a caller sees of an answer: status, headers but the date, body.
type webhookAnswer struct {
	code   int
	header http.Header
	body   string
}

func (a webhookAnswer) String() string {
	return fmt.Sprintf("%d %v %q", a.code, a.header, a.body)
}

func (a webhookAnswer) equal(b webhookAnswer) bool {
	return a.code == b.code && a.body == b.body && maps.EqualFunc(a.header, b.header, slices.Equal)
}

// sendProbeRequest posts body to the suite's receiver over TCP, as anyone who reaches
// its port can, signed with k at ts (ts zero: now).
func sendProbeRequest(t *testing.T, k receiverKey, body string, ts time.Time) webhookAnswer {
	t.Helper()
	if ts.IsZero() {
		ts = time.Now()
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	req, err := http.NewRequest(http.MethodPost, "http://"+receiverAddr+receiver.ProbePath, bytes.NewReader([]byte(body)))
	must(t, err)
	req.Header.Set(receiver.KeyIDHeader, k.id)
	req.Header.Set(receiver.TimestampHeader, stamp)
	req.Header.Set(receiver.SignatureHeader, receiver.SignWithKey(k.id, k.secret, stamp, []byte(body)))
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	h := resp.Header.Clone()
	h.Del("Date")
	return webhookAnswer{code: resp.StatusCode, header: h, body: string(b)}
}

func directBody(namespace, name string) string {
	return fmt.Sprintf(`{"namespace":%q,"name":%q}`, namespace, name)
}

func eventBody(buckets ...string) string {
	body := `{"Records":[`
	for i, b := range buckets {
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`{"eventName":"s3:ObjectCreated:Put","s3":{"bucket":{"name":%q},"object":{"key":"report.csv"}}}`, b)
	}
	return body + `]}`
}

// TestReceiverKeysAreScoped attacks the probe webhook with the key of namespace A, from
// its port, on the real control plane: the key cannot probe, name or detect a claim of
// namespace B (the answers about B's existing claim, by name or by bucket, equal those
// about a claim that does not exist, header for header and byte for byte); a tenant
// cannot make a key by labelling a Secret of its own namespace; replays and rate limits
// are judged per key; and nothing of B changes, in the cluster or on the store.
func TestReceiverKeysAreScoped(t *testing.T) {
	fa := newFixture(t, seaweed)
	fb := newFixture(t, seaweed)
	mine := fa.bucket("mine", probeEvery(time.Hour, bkv1.ProbeModeHead))
	theirs := fb.bucket("theirs", probeEvery(time.Hour, bkv1.ProbeModeHead))
	mineBucket := fa.waitCondition(mine, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded).Status.BucketName
	theirBucket := fb.waitCondition(theirs, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded).Status.BucketName

	// The tenant of A, with every verb on Secrets of its namespace, labels one as a key
	// naming B, and cannot write one where keys live.
	tenant := tenantClient(t, fa)
	forged := receiverKey{id: "forged-" + fa.ns, secret: []byte("forged-key-of-the-tenant-0123")}
	fa.eventually(30*time.Second, "the tenant's labelled Secret", func() error {
		return client.IgnoreAlreadyExists(tenant.Create(fa.ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: fa.ns, Name: forged.id,
				Labels:      map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleReceiverKey},
				Annotations: map[string]string{bkv1.AnnotationReceiverNamespaces: fb.ns}},
			Data: map[string][]byte{bkv1.ReceiverKeySecretKey: forged.secret},
		}))
	})
	err := tenant.Create(fa.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: receiverKeysNamespace, Name: "tenant-" + fa.ns,
		Labels: map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleReceiverKey}}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant writing a Secret where receiver keys live: %v, want Forbidden", err)
	}
	// A Secret where keys live, but without the exact label value, and one labelled
	// but naming no namespace, are no keys either.
	unlabelled := createReceiverKey(t, fa, "unlabelled-"+fa.ns, fa.ns, func(s *corev1.Secret) {
		s.Labels[bkv1.LabelSecretRole] = bkv1.SecretRoleReceiverKey + "s"
	})
	noNamespaces := createReceiverKey(t, fa, "no-namespaces-"+fa.ns, "", func(s *corev1.Secret) {
		delete(s.Annotations, bkv1.AnnotationReceiverNamespaces)
	})

	// The platform team's keys, written after all of the above.
	keyA := createReceiverKey(t, fa, "ci-"+fa.ns, fa.ns)
	keyA2 := createReceiverKey(t, fa, "deploy-"+fa.ns, fa.ns)
	keyB := createReceiverKey(t, fb, "ci-"+fb.ns, " "+fb.ns+" ,")
	missingInA := directBody(fa.ns, "absent")
	for _, k := range []receiverKey{keyA, keyA2, keyB} {
		fa.eventually(30*time.Second, "key "+k.id+" to be loaded", func() error {
			if a := sendProbeRequest(t, k, missingInA, time.Time{}); a.code == http.StatusUnauthorized {
				return errf("%s", a)
			}
			return nil
		})
	}
	fa.waitEvent(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: receiverKeysNamespace, Name: noNamespaces.id}},
		bkv1.EventReasonReceiverKeyInvalid)
	// The keys' informer has delivered Secrets written after these: had it seen them
	// as keys, they would work now.
	for _, k := range []receiverKey{forged, unlabelled, noNamespaces} {
		if a := sendProbeRequest(t, k, directBody(fb.ns, theirs.Name), time.Time{}); a.code != http.StatusUnauthorized {
			t.Errorf("key %s: %s, want 401", k.id, a)
		}
	}

	theirsBefore := fb.get(theirs)
	theirProbes, theirRequests := fb.probes(), requests.snapshot(fb.store)

	// Not yours reads as not there: by name...
	want := sendProbeRequest(t, keyA, missingInA, time.Time{})
	if want.code != http.StatusNotFound {
		t.Fatalf("a missing claim of A: %s, want 404", want)
	}
	for what, body := range map[string]string{
		"B's claim by name":    directBody(fb.ns, theirs.Name),
		"a missing claim of B": directBody(fb.ns, "absent"),
	} {
		if got := sendProbeRequest(t, keyA, body, time.Time{}); !got.equal(want) {
			t.Errorf("%s: %s\nwant the answer about a missing claim of A: %s", what, got, want)
		}
	}
	// ... and by bucket name, in an S3 event.
	want = sendProbeRequest(t, keyA, eventBody(theirBucket+"x"), time.Time{})
	if want.code != http.StatusNotFound {
		t.Fatalf("an unused bucket: %s, want 404", want)
	}
	if got := sendProbeRequest(t, keyA, eventBody(theirBucket), time.Time{}); !got.equal(want) {
		t.Errorf("B's bucket: %s\nwant the answer about an unused bucket: %s", got, want)
	}

	// An event naming both buckets probes mine and names only mine.
	minesProbes := fa.probes()
	got := sendProbeRequest(t, keyA, eventBody(theirBucket, mineBucket), time.Time{})
	if wantBody := fmt.Sprintf(`{"requested":[%q]}`, fa.ns+"/"+mine.Name) + "\n"; got.code != http.StatusAccepted || got.body != wantBody {
		t.Fatalf("an event naming both buckets: %s, want 202 %q", got, wantBody)
	}
	fa.eventually(30*time.Second, "the requested probe of mine", func() error {
		if fa.probes() == minesProbes {
			return errf("no probe yet")
		}
		return nil
	})

	// Replays are per key: refused with the key that was accepted, a request of its
	// own with another key; a request signed with one key cannot be sent as another.
	ts := time.Now()
	body := fmt.Sprintf(`{"namespace":%q,"name":%q,"nonce":"replay"}`, fa.ns, mine.Name)
	if a := sendProbeRequest(t, keyA, body, ts); a.code != http.StatusAccepted {
		t.Fatalf("first request: %s", a)
	}
	if a := sendProbeRequest(t, keyA, body, ts); a.code != http.StatusConflict {
		t.Fatalf("replayed with the same key: %s, want 409", a)
	}
	if a := sendProbeRequest(t, keyA2, body, ts); a.code != http.StatusAccepted {
		t.Fatalf("the same body and time signed with another key: %s, want 202", a)
	}
	moved := receiverKey{id: keyB.id, secret: keyA.secret}
	if a := sendProbeRequest(t, moved, directBody(fb.ns, theirs.Name), time.Time{}); a.code != http.StatusUnauthorized {
		t.Fatalf("signed with A's key, sent as B's: %s, want 401", a)
	}

	// Rate limits are per key: A's second key spends its budget on B's claims (which
	// cost what missing ones cost), while B's key is still served.
	limited := false
	for i := 0; i < 500 && !limited; i++ {
		a := sendProbeRequest(t, keyA2, directBody(fb.ns, fmt.Sprintf("spend-%d", i)), time.Time{})
		switch a.code {
		case http.StatusTooManyRequests:
			limited = true
		case http.StatusNotFound:
		default:
			t.Fatalf("request %d of the spending key: %s", i, a)
		}
	}
	if !limited {
		t.Fatal("500 requests of one key, and none was refused 429")
	}
	if a := sendProbeRequest(t, keyB, directBody(fb.ns, "absent"), time.Time{}); a.code != http.StatusNotFound {
		t.Fatalf("B's key right after A's was limited: %s, want 404", a)
	}

	// Nothing of B changed: not its claim (no annotation was written: the receiver
	// writes it before answering 202), not its probes, nothing on its store.
	if cur := fb.get(theirs); cur.ResourceVersion != theirsBefore.ResourceVersion || cur.Annotations[bkv1.AnnotationProbeRequestedAt] != "" {
		t.Fatalf("B's claim changed: version %s -> %s, annotations %v", theirsBefore.ResourceVersion, cur.ResourceVersion, cur.Annotations)
	}
	if n := fb.probes() - theirProbes; n != 0 {
		t.Fatalf("B's bucket was probed %d times", n)
	}
	if _, mutating, ops := since(theirRequests, requests.snapshot(fb.store)); mutating != 0 {
		t.Fatalf("requests that change B's store: %v", ops)
	}

	// What callers send never becomes a metric label: only the keys' ids, "*" and "".
	known := map[string]bool{receiver.ObserveNoKey: true, receiver.ObserveClusterWideKey: true, keyA.id: true, keyA2.id: true, keyB.id: true}
	families, err := crmetrics.Registry.Gather()
	must(t, err)
	for _, mf := range families {
		if mf.GetName() != "bucketkeeper_receiver_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "key" && !known[l.GetValue()] {
					t.Errorf("metric series for key %q", l.GetValue())
				}
			}
		}
	}
}
