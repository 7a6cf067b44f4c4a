package invariants

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
)

const moverNS = "ops"

// moveObjects are what a move's movers leave in the mover namespace: a Job, its spec,
// the Secret of both stores' keys, a checkpoint and the move's record.
func moveObjects(id string) []client.Object {
	labels := map[string]string{bkv1.LabelMoveJob: id}
	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: moverNS, Name: name, Labels: labels}
	}
	return []client.Object{
		&batchv1.Job{ObjectMeta: meta(mover.JobName(id, 2), labels)},
		&corev1.ConfigMap{ObjectMeta: meta(mover.JobName(id, 2), labels)},
		&corev1.Secret{ObjectMeta: meta(bkv1.MoveCheckpointPrefix+id+"-credentials", labels)},
		&corev1.ConfigMap{ObjectMeta: meta(mover.CheckpointName(id, 0), map[string]string{bkv1.LabelMove: id})},
		&corev1.ConfigMap{ObjectMeta: meta(mover.RecordName(id), labels)},
	}
}

func moveIDOf(sb *bkv1.StorageBucket, attempt string) string {
	return strings.ReplaceAll(string(sb.UID), "-", "") + "-" + attempt
}

// TestMoverObjectsOfAGoneMove: a claim whose finalizer was stripped mid-move, or whose
// move moved on to a later attempt or ended, leaves its movers' Job, Secret and
// ConfigMaps behind; each is reported. Those of the claim's current move are not, nor
// a Job being deleted (its pods first), nor the ConfigMaps of a cancelled move that
// keeps its target to resume.
func TestMoverObjectsOfAGoneMove(t *testing.T) {
	w := newWorld(t)
	w.sb.Status.Move = &bkv1.MoveStatus{ID: moveIDOf(w.sb, "2"), Phase: bkv1.MoveCopying, From: store, To: "store-b"}
	w.objects = append(w.objects, moveObjects(moveIDOf(w.sb, "2"))...)
	check := func() []Violation {
		return Check(t.Context(), fakeClient(w), viewsOf(w), cluster, MoverNamespace(moverNS))
	}
	expectNone(t, check())

	for _, tc := range []struct {
		name, fragment string
		breach         func(w *world) string // returns the move whose objects are reported
	}{
		{"claim gone", "no longer exists", func(w *world) string {
			id := strings.Repeat("ab", 16) + "-1"
			w.objects = append(w.objects, moveObjects(id)...)
			return id
		}},
		{"earlier attempt", "move is " + moveIDOf(w.sb, "2"), func(w *world) string {
			id := moveIDOf(w.sb, "1")
			w.objects = append(w.objects, moveObjects(id)...)
			return id
		}},
		{"move ended", "records as Done", func(w *world) string {
			w.sb.Status.Move.Phase = bkv1.MoveDone
			return moveIDOf(w.sb, "2")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.sb.Status.Move = &bkv1.MoveStatus{ID: moveIDOf(w.sb, "2"), Phase: bkv1.MoveCopying, From: store, To: "store-b"}
			w.objects = append(w.objects, moveObjects(moveIDOf(w.sb, "2"))...)
			id := tc.breach(w)
			got := Check(t.Context(), fakeClient(w), viewsOf(w), cluster, MoverNamespace(moverNS))
			want := map[string]bool{
				"job " + moverNS + "/" + mover.JobName(id, 2): true, "configmap " + moverNS + "/" + mover.JobName(id, 2): true,
				"secret " + moverNS + "/" + bkv1.MoveCheckpointPrefix + id + "-credentials": true,
				"configmap " + moverNS + "/" + mover.CheckpointName(id, 0):                  true, "configmap " + moverNS + "/" + mover.RecordName(id): true,
			}
			for _, v := range got {
				if v.Invariant != MoverOwned || !want[v.Object] || !strings.Contains(v.Found, tc.fragment) {
					t.Errorf("unexpected %s", v)
				}
				delete(want, v.Object)
			}
			for object := range want {
				t.Errorf("%s not reported", object)
			}
		})
	}

	// A cancelled move that keeps its target keeps its ConfigMaps (checkpoints, a
	// pass's spec, its record) with it, to resume: only its Job and Secret are leaks.
	w = newWorld(t)
	kept := moveIDOf(w.sb, "3")
	w.sb.Status.Move = &bkv1.MoveStatus{ID: kept, Phase: bkv1.MoveAborted, From: store, To: "store-b", TargetKeptOn: "store-b"}
	w.objects = append(w.objects, moveObjects(kept)...)
	leaks := map[string]bool{"job " + moverNS + "/" + mover.JobName(kept, 2): true,
		"secret " + moverNS + "/" + bkv1.MoveCheckpointPrefix + kept + "-credentials": true}
	for _, v := range Check(t.Context(), fakeClient(w), viewsOf(w), cluster, MoverNamespace(moverNS)) {
		if !leaks[v.Object] {
			t.Errorf("a kept move's object reported: %s", v)
		}
		delete(leaks, v.Object)
	}
	for object := range leaks {
		t.Errorf("a kept move's %s not reported", object)
	}

	// A Job being deleted is the garbage collector's to finish.
	w = newWorld(t)
	id := strings.Repeat("cd", 16) + "-1"
	job := moveObjects(id)[0]
	job.SetFinalizers([]string{"foregroundDeletion"})
	deleting(job)
	w.objects = append(w.objects, job)
	expectNone(t, Check(t.Context(), fakeClient(w), viewsOf(w), cluster, MoverNamespace(moverNS)))
}
