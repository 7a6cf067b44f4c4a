package mover

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
)

// ConfigMapCheckpoints keep each shard's checkpoint in a ConfigMap of the operator's
// namespace, named CheckpointName. Why there: it survives the mover pod and the
// operator (etcd holds it), no tenant can write it (tenants have no verbs in the
// operator's namespace, and nothing of it is read from theirs), the mover needs
// only get, create and update on ConfigMaps of one namespace, and it costs one small
// write per CheckpointInterval per shard. Not on the stores: the target bucket
// becomes the tenant's at cutover, and a checkpoint there would be theirs to forge.
// Not in the StorageBucket's status: the mover would need to write the status of
// every claim in the cluster, and a status is rewritten whole by its controller.
type ConfigMapCheckpoints struct {
	Client    client.Client
	Namespace string
	// CallTimeout bounds each API call (zero: 10 s).
	CallTimeout time.Duration

	versions memo.Map[string, string] // resourceVersion of each ConfigMap as last read or written
}

var _ Checkpoints = (*ConfigMapCheckpoints)(nil)

// Keys of a checkpoint ConfigMap.
const (
	checkpointDataKey  = "checkpoint.json"
	equivalentDataKey  = "equivalent"
	maxCheckpointBytes = 900 << 10 // a ConfigMap holds at most 1 MiB
)

// CheckpointName is the name of a shard's checkpoint ConfigMap.
func CheckpointName(moveID string, shard int) string {
	if shard == PlanShard {
		return bkv1.MoveCheckpointPrefix + moveID + "-plan"
	}
	return bkv1.MoveCheckpointPrefix + moveID + "-" + strconv.Itoa(shard)
}

func (s *ConfigMapCheckpoints) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.CallTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

// Load reads the shard's checkpoint.
func (s *ConfigMapCheckpoints) Load(ctx context.Context, moveID string, shard int) (*Checkpoint, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	cm := &corev1.ConfigMap{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: CheckpointName(moveID, shard)}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %s/%s: %w", s.Namespace, CheckpointName(moveID, shard), err)
	}
	s.remember(cm)
	return decodeCheckpoint(cm)
}

func decodeCheckpoint(cm *corev1.ConfigMap) (*Checkpoint, error) {
	cp := &Checkpoint{}
	if err := json.Unmarshal([]byte(cm.Data[checkpointDataKey]), cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	eq, err := unmarshalEquivalences(cm.BinaryData[equivalentDataKey])
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	cp.equivalent = eq
	return cp, nil
}

func (s *ConfigMapCheckpoints) remember(cm *corev1.ConfigMap) {
	s.versions.Set(cm.Name, cm.ResourceVersion)
}

// Save writes cp over the version last read or written. On a conflict it reads the
// ConfigMap again: a checkpoint of a later pass, or of this pass by another writer,
// means this mover was superseded; anything else (its own earlier write whose answer
// was lost) is written over.
func (s *ConfigMapCheckpoints) Save(ctx context.Context, cp *Checkpoint) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	var eq []byte
	if cp.equivalent != nil {
		eq = cp.equivalent.marshal()
	}
	if len(data)+len(eq) > maxCheckpointBytes {
		return fmt.Errorf("checkpoint of shard %d is %d bytes, more than a ConfigMap holds", cp.Shard, len(data)+len(eq))
	}
	name := CheckpointName(cp.MoveID, cp.Shard)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name, Labels: map[string]string{
			bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelMove: cp.MoveID,
		}},
		Data:       map[string]string{checkpointDataKey: string(data)},
		BinaryData: map[string][]byte{equivalentDataKey: eq},
	}
	for attempt := 0; ; attempt++ {
		rv, known := s.versions.Get(name)
		if !known {
			err = s.Client.Create(ctx, cm)
			if apierrors.IsAlreadyExists(err) {
				err = s.reread(ctx, cp, name)
				if err == nil && attempt < 3 {
					continue
				}
			}
		} else {
			cm.ResourceVersion = rv
			err = s.Client.Update(ctx, cm)
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				err = s.reread(ctx, cp, name)
				if err == nil && attempt < 3 {
					continue
				}
			}
		}
		if err != nil {
			return fmt.Errorf("writing checkpoint %s/%s: %w", s.Namespace, name, err)
		}
		s.remember(cm)
		return nil
	}
}

// reread fetches the stored checkpoint after a conflict and says whether cp may be
// written over it.
func (s *ConfigMapCheckpoints) reread(ctx context.Context, cp *Checkpoint, name string) error {
	cur := &corev1.ConfigMap{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, cur)
	if apierrors.IsNotFound(err) {
		s.versions.Delete(name)
		return nil
	}
	if err != nil {
		return err
	}
	stored, err := decodeCheckpoint(cur)
	if err != nil {
		return err
	}
	if stored.Pass > cp.Pass || (stored.Pass == cp.Pass && stored.Writer != cp.Writer && stored.Updated.After(cp.RunStarted)) {
		return fmt.Errorf("%w (pass %d by %s)", ErrSuperseded, stored.Pass, stored.Writer)
	}
	s.remember(cur)
	return nil
}

// List returns the move's checkpoints, the plan's first, then by shard.
func (s *ConfigMapCheckpoints) List(ctx context.Context, moveID string) ([]*Checkpoint, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var list corev1.ConfigMapList
	if err := s.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{bkv1.LabelMove: moveID}); err != nil {
		return nil, err
	}
	var out []*Checkpoint
	for i := range list.Items {
		cp, err := decodeCheckpoint(&list.Items[i])
		if err != nil {
			return nil, err
		}
		if cp.MoveID == moveID {
			out = append(out, cp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out, nil
}

// Delete removes the move's checkpoints.
func (s *ConfigMapCheckpoints) Delete(ctx context.Context, moveID string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err := s.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(s.Namespace), client.MatchingLabels{bkv1.LabelMove: moveID})
	if err != nil {
		return fmt.Errorf("deleting the checkpoints of move %s: %w", moveID, err)
	}
	return nil
}
