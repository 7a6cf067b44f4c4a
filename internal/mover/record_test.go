package mover

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// nopRunner runs nothing; its passes are verified when verified says so.
type nopRunner struct {
	forgotten []string
	verified  bool
}

func (*nopRunner) Start(context.Context, Move) error { return nil }
func (r *nopRunner) Progress(_ context.Context, _ string, pass, shards int) (Progress, error) {
	return Progress{Pass: pass, Shards: shards, Done: shards, Verified: r.verified}, nil
}
func (*nopRunner) Cancel(context.Context, string) error { return nil }
func (r *nopRunner) Forget(_ context.Context, id string) error {
	r.forgotten = append(r.forgotten, id)
	return nil
}

// TestRecordedKeepsAMovesRecord, on a fake API server: the first Start of a move writes
// its record (both buckets, no key), later ones do not write it again, a verified final
// pass read through Progress marks it (one not verified does not), ListMoves finds
// it with every other object of the move (Jobs, their spec, the keys' Secret,
// checkpoints) by move, and Forget deletes it after the runner forgot the move.
func TestRecordedKeepsAMovesRecord(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	inner := &nopRunner{}
	r := &Recorded{Runner: inner, Client: c, Namespace: "ops"}
	id := "0123456789abcdef0123456789abcdef-2"
	spec := Spec{MoveID: id, Mode: ModeCopy, Pass: 2,
		Source: Bucket{Endpoint: "http://src", Bucket: "b"}, Target: Bucket{Endpoint: "http://tgt", Region: "eu", Bucket: "b"}}
	keys := Credentials{AccessKeyID: "AK", SecretAccessKey: "SECRET"}
	for range 2 {
		if err := r.Start(ctx, Move{Spec: spec, Source: keys, Target: keys}); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: RecordName(id)}, cm); err != nil {
		t.Fatal(err)
	}
	if body := cm.Data[recordKey]; body == "" || strings.Contains(body, "SECRET") || strings.Contains(body, `"AK"`) {
		t.Errorf("the record %q: want both buckets and no key", body)
	}
	labels := map[string]string{bkv1.LabelMoveJob: id}
	for _, obj := range []client.Object{
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: JobName(id, 2), Labels: labels}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: credentialsSecretName(id), Labels: labels}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: CheckpointName(id, 0), Labels: map[string]string{bkv1.LabelMove: id}}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Progress(ctx, id, 2, 3); err != nil {
		t.Fatal(err)
	}
	if moves, err := ListMoves(ctx, c, "ops"); err != nil || moves[id].Record == nil || moves[id].Record.Verified {
		t.Fatalf("the record before a verified pass: %+v (%v), want it unmarked", moves[id], err)
	}
	inner.verified = true
	if _, err := r.Progress(ctx, id, 3, 3); err != nil {
		t.Fatal(err)
	}
	moves, err := ListMoves(ctx, c, "ops")
	if err != nil {
		t.Fatal(err)
	}
	l := moves[id]
	switch {
	case len(moves) != 1 || l == nil:
		t.Fatalf("moves %v, want only %s", moves, id)
	case l.Record == nil || l.Record.Target.Endpoint != "http://tgt" || l.Record.Target.Region != "eu" || l.Record.Source.Bucket != "b" || !l.Record.Verified:
		t.Errorf("record %+v", l.Record)
	case len(l.Jobs) != 1 || len(l.Secrets) != 1 || len(l.ConfigMaps) != 2:
		t.Errorf("found %d Jobs, %v Secrets, %v ConfigMaps; want the Job, the keys and the checkpoint and record", len(l.Jobs), l.Secrets, l.ConfigMaps)
	}
	if err := r.Forget(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err == nil || len(inner.forgotten) != 1 {
		t.Errorf("after Forget: the record (%v), the runner forgot %v", err, inner.forgotten)
	}
}

// TestClaimOfMove: only IDs of the controller's form name a claim.
func TestClaimOfMove(t *testing.T) {
	for id, want := range map[string]string{
		"0123456789abcdef0123456789abcdef-1":   "0123456789abcdef0123456789abcdef",
		"0123456789abcdef0123456789abcdef-999": "0123456789abcdef0123456789abcdef",
		"0123456789abcdef0123456789abcdef":     "",
		"0123456789abcdef0123456789abcdeg-1":   "",
		"0123456789abcdef-1":                   "",
		"0123456789abcdef0123456789abcdef-1-2": "",
		"0123456789abcdef0123456789abcdef-x":   "",
		"m1":                                   "",
	} {
		got, ok := ClaimOfMove(id)
		if got != want || ok != (want != "") {
			t.Errorf("ClaimOfMove(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
}
