package mover

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// Jobs runs each pass of a move as an Indexed Job in the operator's namespace, never
// a tenant's (its pods hold both stores' keys): one pod per shard, each running
// `bucketkeeper mover` (the operator's own image) on the shard its completion index
// names. A pass's Job reads its Spec from a ConfigMap it owns and the keys from the
// move's Secret; its pods write the checkpoints Progress reads, so a pod killed
// anywhere is replaced by the Job and resumes from its shard's checkpoint, and a
// restarted operator finds the Job of the pass it wants already there.
type Jobs struct {
	// Client reads and writes the Jobs, their ConfigMaps and the Secret, uncached.
	Client      client.Client
	Checkpoints Checkpoints
	Namespace   string
	// Image is the operator's image; ServiceAccount the movers' (it may write
	// ConfigMaps of Namespace, nothing else).
	Image          string
	ServiceAccount string
	// Parallelism is the most pods of one pass that run at once (zero: one per
	// shard); Resources each pod's requests and limits.
	Parallelism int32
	Resources   corev1.ResourceRequirements
	// CallTimeout bounds each API call (zero: 10 s).
	CallTimeout time.Duration
}

var _ Runner = (*Jobs)(nil)

// Where a mover pod finds its spec and keys (cmd/bucketkeeper/mover.go's defaults).
const (
	jobSpecDir        = "/etc/bucketkeeper/mover/spec"
	jobSpecKey        = "spec.json"
	jobCredentialsDir = "/etc/bucketkeeper/mover/credentials"
)

// jobBackoffPerShard: the pod restarts a pass's Job allows per shard before it fails
// (a killed pod counts one); Start then makes the Job again.
const jobBackoffPerShard = 6

// JobName is the name of the Job (and of its spec ConfigMap) of a move's pass.
func JobName(moveID string, pass int) string {
	return bkv1.MoveCheckpointPrefix + moveID + "-p" + strconv.Itoa(pass)
}

func credentialsSecretName(moveID string) string {
	return bkv1.MoveCheckpointPrefix + moveID + "-credentials"
}

func (j *Jobs) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := j.CallTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

// Start makes the pass's Job unless it exists, after deleting the Jobs of the move's
// other passes. A Job that failed (its pods' restarts used up) is deleted, to be made
// again by the next Start.
func (j *Jobs) Start(ctx context.Context, move Move) error {
	spec := move.Spec
	if err := spec.Validate(); err != nil {
		return err
	}
	ctx, cancel := j.ctx(ctx)
	defer cancel()
	jobs := &batchv1.JobList{}
	if err := j.Client.List(ctx, jobs, client.InNamespace(j.Namespace), client.MatchingLabels{bkv1.LabelMoveJob: spec.MoveID}); err != nil {
		return fmt.Errorf("listing the mover Jobs of move %s: %w", spec.MoveID, err)
	}
	name := JobName(spec.MoveID, spec.Pass)
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if job.Name == name && !jobFailed(job) {
			return nil // running, or done: Progress reads its checkpoints
		}
		if err := j.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting mover Job %s: %w", job.Name, err)
		}
		if job.Name == name {
			return fmt.Errorf("mover Job %s failed (its pods' restarts used up); it is made again", name)
		}
	}
	if err := j.ensureCredentials(ctx, spec.MoveID, move.Source, move.Target); err != nil {
		return err
	}
	spec = perPod(spec, runningShards(&spec, int(j.Parallelism)))
	job := j.job(&spec, name)
	job.Spec.Template.Spec.Containers[0].Resources = cappedResources(j.Resources, move.Caps)
	if err := j.Client.Create(ctx, job); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating mover Job %s: %w", name, err)
	}
	body, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: name, Labels: j.labels(spec.MoveID),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Data: map[string]string{jobSpecKey: string(body)},
	}
	if err := j.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the spec of mover Job %s: %w", name, err)
	}
	return nil
}

// perPod divides the move's request budget on each store (the spec's) among the pods
// of the pass that run at once: each pod builds its own token bucket from the spec it
// reads, so together they spend what the move was given. A burst is at least one
// request per pod.
func perPod(spec Spec, pods int) Spec {
	if pods <= 1 {
		return spec
	}
	for _, b := range []*Bucket{&spec.Source, &spec.Target} {
		if b.RequestsPerSecond > 0 {
			b.RequestsPerSecond /= float64(pods)
			b.Burst = max(1, b.Burst/pods)
		}
	}
	return spec
}

func jobFailed(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func (j *Jobs) labels(moveID string) map[string]string {
	return map[string]string{bkv1.LabelMoveJob: moveID, "app.kubernetes.io/name": "bucketkeeper-mover"}
}

// ensureCredentials writes both stores' keys into the move's Secret.
func (j *Jobs) ensureCredentials(ctx context.Context, moveID string, source, target Credentials) error {
	want := CredentialsData(source, target)
	secret := &corev1.Secret{}
	err := j.Client.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: credentialsSecretName(moveID)}, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: credentialsSecretName(moveID), Labels: j.labels(moveID)}, Data: want}
		if err := j.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("writing the keys of move %s: %w", moveID, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading the keys of move %s: %w", moveID, err)
	}
	if maps.EqualFunc(secret.Data, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		return nil
	}
	secret.Data = want
	if err := j.Client.Update(ctx, secret); err != nil {
		return fmt.Errorf("updating the keys of move %s: %w", moveID, err)
	}
	return nil
}

// job is the Indexed Job of one pass: a pod per shard, at most Parallelism (and the
// spec's) at once,
// each as locked down as the operator's own (non-root, read-only root, no
// capabilities, the runtime's seccomp profile).
func (j *Jobs) job(spec *Spec, name string) *batchv1.Job {
	shards := int32(spec.RunShards())
	parallelism := int32(runningShards(spec, int(j.Parallelism)))
	labels := j.labels(spec.MoveID)
	podLabels := maps.Clone(labels)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To(shards),
			Parallelism:    ptr.To(parallelism),
			BackoffLimit:   ptr.To(jobBackoffPerShard * shards),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					ServiceAccountName:            j.ServiceAccount,
					TerminationGracePeriodSeconds: ptr.To(int64(10)),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)), RunAsGroup: ptr.To(int64(65532)),
						FSGroup:        ptr.To(int64(65532)), // the keys' files are the group's to read (0440)
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  "mover",
						Image: j.Image,
						Args:  []string{"mover", "--spec=" + jobSpecDir + "/" + jobSpecKey, "--credentials=" + jobCredentialsDir},
						Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}},
						Resources: j.Resources,
						SecurityContext: &corev1.SecurityContext{
							ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "spec", MountPath: jobSpecDir, ReadOnly: true},
							{Name: "credentials", MountPath: jobCredentialsDir, ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "spec", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: name}}}},
						{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: credentialsSecretName(spec.MoveID), DefaultMode: ptr.To(int32(0o440))}}},
					},
				},
			},
		},
	}
}

// cappedResources are a mover pod's requests and limits, equal: the operator's, each
// lowered to its cap where one is set (and set to it where the operator sets none).
func cappedResources(own corev1.ResourceRequirements, caps corev1.ResourceList) corev1.ResourceRequirements {
	if len(caps) == 0 {
		return own
	}
	list := own.Limits.DeepCopy()
	if list == nil {
		list = corev1.ResourceList{}
	}
	for name, limit := range caps {
		if have, ok := list[name]; !ok || limit.Cmp(have) < 0 {
			list[name] = limit
		}
	}
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}
}

// Progress reads the pass from the checkpoints its pods write.
func (j *Jobs) Progress(ctx context.Context, moveID string, pass, shards int) (Progress, error) {
	return progressOf(ctx, j.Checkpoints, moveID, pass, shards)
}

// Cancel deletes the move's Jobs and returns once they are gone: their pods are
// deleted before them (foreground deletion), each given 10 s to stop.
func (j *Jobs) Cancel(ctx context.Context, moveID string) error {
	cctx, cancel := j.ctx(ctx)
	defer cancel()
	jobs := &batchv1.JobList{}
	if err := j.Client.List(cctx, jobs, client.InNamespace(j.Namespace), client.MatchingLabels{bkv1.LabelMoveJob: moveID}); err != nil {
		return fmt.Errorf("listing the mover Jobs of move %s: %w", moveID, err)
	}
	for i := range jobs.Items {
		if err := j.Client.Delete(cctx, &jobs.Items[i], client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting mover Job %s: %w", jobs.Items[i].Name, err)
		}
	}
	if len(jobs.Items) > 0 {
		return fmt.Errorf("%w: move %s has %d mover Jobs still stopping", ErrStopping, moveID, len(jobs.Items))
	}
	return nil
}

// ErrStopping: a Runner asked to stop a move's movers has not seen them stop yet;
// asked again later, it returns nil once they have.
var ErrStopping = fmt.Errorf("the mover is still stopping")

// Forget stops the move's Jobs, then deletes its checkpoints and keys.
func (j *Jobs) Forget(ctx context.Context, moveID string) error {
	if err := j.Cancel(ctx, moveID); err != nil {
		return err
	}
	if err := j.Checkpoints.Delete(ctx, moveID); err != nil {
		return err
	}
	cctx, cancel := j.ctx(ctx)
	defer cancel()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: credentialsSecretName(moveID)}}
	if err := j.Client.Delete(cctx, secret); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the keys of move %s: %w", moveID, err)
	}
	return nil
}
