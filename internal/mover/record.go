package mover

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
)

// Recorded is a Runner that keeps a record of each move beside its checkpoints: a
// ConfigMap of the operator's namespace (RecordName) naming the buckets the move copies
// from and to, written before the move's first pass starts and deleted when the move
// is forgotten. A move's claim can go without its move being cancelled (a tenant
// removes the finalizer mid-move), and then the record is what still says which
// bucket is the target the move made and which the source it froze: the collector of
// move leftovers reads it (ListMoves) before it removes what the move left.
type Recorded struct {
	Runner
	// Client reads and writes the records, uncached.
	Client    client.Client
	Namespace string
	// CallTimeout bounds each API call (zero: 10 s).
	CallTimeout time.Duration

	written  memo.Map[string, bool] // moves whose record this process wrote or found
	verified memo.Map[string, bool] // moves whose record this process marked verified
}

var _ Runner = (*Recorded)(nil)

// Record is what a move's record says: where it copies from and to, and whether the
// controller was told of a verified final pass. It holds no credentials.
type Record struct {
	MoveID string     `json:"moveID"`
	Source RecordSide `json:"source"`
	Target RecordSide `json:"target"`
	// Verified: Progress answered a final pass verified on every shard, after which
	// the controller may switch the claim's home to the target (and applications
	// write there). Until then the target holds nothing but copies.
	Verified bool `json:"verified,omitempty"`
}

// RecordSide is one bucket of a move, as its store is reached.
type RecordSide struct {
	Endpoint string `json:"endpoint,omitempty"`
	Region   string `json:"region,omitempty"`
	Bucket   string `json:"bucket"`
}

// Keys of the record ConfigMap: the record, and the mark of a verified final pass
// (a key of its own, so that marking it rewrites nothing else).
const (
	recordKey   = "record.json"
	verifiedKey = "verified"
)

// RecordName is the name of a move's record ConfigMap.
func RecordName(moveID string) string {
	return bkv1.MoveCheckpointPrefix + moveID + "-record"
}

func (r *Recorded) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := r.CallTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

// Start writes the move's record, once, then starts the pass.
func (r *Recorded) Start(ctx context.Context, move Move) error {
	if err := r.record(ctx, move.Spec); err != nil {
		return err
	}
	return r.Runner.Start(ctx, move)
}

func (r *Recorded) record(ctx context.Context, spec Spec) error {
	if r.written.Has(spec.MoveID) {
		return nil
	}
	rec := Record{MoveID: spec.MoveID,
		Source: RecordSide{Endpoint: spec.Source.Endpoint, Region: spec.Source.Region, Bucket: spec.Source.Bucket},
		Target: RecordSide{Endpoint: spec.Target.Endpoint, Region: spec.Target.Region, Bucket: spec.Target.Bucket}}
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: RecordName(spec.MoveID), Labels: map[string]string{
			bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelMoveJob: spec.MoveID,
		}},
		Data: map[string]string{recordKey: string(body)},
	}
	cctx, cancel := r.ctx(ctx)
	defer cancel()
	if err := r.Client.Create(cctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("writing the record of move %s: %w", spec.MoveID, err)
	}
	r.written.Set(spec.MoveID, true)
	return nil
}

// Progress reads the pass; a final pass verified on every shard is marked in the
// record before the controller hears of it, so the record says when the claim may have
// switched to the target.
func (r *Recorded) Progress(ctx context.Context, moveID string, pass, shards int) (Progress, error) {
	p, err := r.Runner.Progress(ctx, moveID, pass, shards)
	if err != nil || !p.Verified || p.Done < shards || r.verified.Has(moveID) {
		return p, err
	}
	cctx, cancel := r.ctx(ctx)
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: RecordName(moveID)}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"`+verifiedKey+`":"true"}}`))
	if err := r.Client.Patch(cctx, cm, patch); client.IgnoreNotFound(err) != nil {
		return Progress{}, fmt.Errorf("marking the record of move %s verified: %w", moveID, err)
	}
	r.verified.Set(moveID, true)
	return p, nil
}

// Forget forgets the move, then deletes its record.
func (r *Recorded) Forget(ctx context.Context, moveID string) error {
	if err := r.Runner.Forget(ctx, moveID); err != nil {
		return err
	}
	cctx, cancel := r.ctx(ctx)
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: RecordName(moveID)}}
	if err := r.Client.Delete(cctx, cm); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the record of move %s: %w", moveID, err)
	}
	r.written.Delete(moveID)
	r.verified.Delete(moveID)
	return nil
}

// Unwrap is the runner the records are kept for.
func (r *Recorded) Unwrap() Runner { return r.Runner }

// Leftovers are what a move made in the operator's namespace, as ListMoves finds it.
type Leftovers struct {
	// Record is the move's record, nil when it has none (or it cannot be read).
	Record *Record
	// Jobs are the move's Jobs; ConfigMaps and Secrets the names of its ConfigMaps
	// (checkpoints, the passes' specs, its record) and Secrets (its keys).
	Jobs                []batchv1.Job
	ConfigMaps, Secrets []string
	// Oldest is when the oldest of them was made.
	Oldest time.Time
}

// ListMoves finds everything the movers and their runners made in namespace, by move
// ID: the objects labelled bucketkeeper.io/move (checkpoints) or
// bucketkeeper.io/move-job (Jobs, the passes' spec ConfigMaps, the keys' Secret, the
// record). Tenants make no object there, so what it holds is bounded by the moves the
// operator ran.
func ListMoves(ctx context.Context, c client.Reader, namespace string) (map[string]*Leftovers, error) {
	out := map[string]*Leftovers{}
	add := func(id string, made metav1.Time) *Leftovers {
		l := out[id]
		if l == nil {
			l = &Leftovers{Oldest: made.Time}
			out[id] = l
		}
		if made.Time.Before(l.Oldest) {
			l.Oldest = made.Time
		}
		return l
	}
	jobs := &batchv1.JobList{}
	if err := c.List(ctx, jobs, client.InNamespace(namespace), client.HasLabels{bkv1.LabelMoveJob}); err != nil {
		return nil, fmt.Errorf("listing mover Jobs: %w", err)
	}
	for _, job := range jobs.Items {
		if id := job.Labels[bkv1.LabelMoveJob]; id != "" {
			l := add(id, job.CreationTimestamp)
			l.Jobs = append(l.Jobs, job)
		}
	}
	// The Secrets' metadata only: their keys are never read here.
	secrets := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "SecretList"}}
	if err := c.List(ctx, secrets, client.InNamespace(namespace), client.HasLabels{bkv1.LabelMoveJob}); err != nil {
		return nil, fmt.Errorf("listing the movers' Secrets: %w", err)
	}
	for _, m := range secrets.Items {
		if id := m.Labels[bkv1.LabelMoveJob]; id != "" {
			l := add(id, m.CreationTimestamp)
			l.Secrets = append(l.Secrets, m.Name)
		}
	}
	for _, label := range []string{bkv1.LabelMove, bkv1.LabelMoveJob} {
		list := &corev1.ConfigMapList{}
		if err := c.List(ctx, list, client.InNamespace(namespace), client.HasLabels{label}); err != nil {
			return nil, fmt.Errorf("listing the movers' ConfigMaps: %w", err)
		}
		for i := range list.Items {
			cm := &list.Items[i]
			id := cm.Labels[label]
			if id == "" || (label == bkv1.LabelMoveJob && cm.Labels[bkv1.LabelMove] != "") {
				continue // counted under its checkpoint label
			}
			l := add(id, cm.CreationTimestamp)
			l.ConfigMaps = append(l.ConfigMaps, cm.Name)
			if cm.Name == RecordName(id) {
				rec := &Record{}
				if json.Unmarshal([]byte(cm.Data[recordKey]), rec) == nil && rec.MoveID == id {
					rec.Verified = cm.Data[verifiedKey] == "true"
					l.Record = rec
				}
			}
		}
	}
	return out, nil
}

// ClaimOfMove is the UID, without its dashes, of the StorageBucket whose move moveID
// is ("<UID without dashes>-<attempt>", as the controller names its moves); ok is false
// for an ID of another form, which is nobody's to judge.
func ClaimOfMove(moveID string) (string, bool) {
	uid, attempt, found := strings.Cut(moveID, "-")
	if !found || len(uid) != 32 || attempt == "" || strings.Contains(attempt, "-") {
		return "", false
	}
	for _, c := range uid + attempt {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	for _, c := range attempt {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return uid, true
}

// DeleteMove deletes the ConfigMaps and Secrets l names in namespace (its Jobs are
// stopped first, by the caller). An object already gone is no failure.
func DeleteMove(ctx context.Context, c client.Client, namespace string, l *Leftovers) error {
	del := func(obj client.Object, opts ...client.DeleteOption) error {
		if err := c.Delete(ctx, obj, opts...); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, namespace, obj.GetName(), err)
		}
		return nil
	}
	for _, name := range l.Secrets {
		if err := del(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}); err != nil {
			return err
		}
	}
	for _, name := range l.ConfigMaps {
		if err := del(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}); err != nil {
			return err
		}
	}
	return nil
}
