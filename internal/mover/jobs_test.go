package mover

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestJobsRunAPassAsAnIndexedJob, on a fake API server (the install test runs the
// real Jobs on a real node): a pass is one Indexed Job of a pod per shard, at most
// Parallelism at once, locked down, with its spec in a ConfigMap the Job owns and the
// keys in the move's Secret; Start again is a no-op, the next pass replaces the Job,
// Cancel says the Jobs are still stopping until they are gone, and Forget removes the
// keys and the checkpoints.
func TestJobsRunAPassAsAnIndexedJob(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	limits := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
	j := &Jobs{Client: c, Checkpoints: &ConfigMapCheckpoints{Client: c, Namespace: "ops"}, Namespace: "ops",
		Image: "bucketkeeper:dev", ServiceAccount: "movers", Parallelism: 2, Resources: corev1.ResourceRequirements{Limits: limits, Requests: limits}}
	spec := Spec{MoveID: "m1", Mode: ModeCopy, Pass: 2, Boundaries: []string{"g", "p"},
		Source: Bucket{Endpoint: "http://src", Bucket: "b"}, Target: Bucket{Endpoint: "http://tgt", Bucket: "b"}}
	keys := Credentials{AccessKeyID: "AK", SecretAccessKey: "SK"}
	for range 2 {
		if err := j.Start(ctx, Move{Spec: spec, Source: keys, Target: keys}); err != nil {
			t.Fatal(err)
		}
	}
	jobs := &batchv1.JobList{}
	if err := c.List(ctx, jobs, client.InNamespace("ops")); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("%d Jobs (%v), want 1", len(jobs.Items), err)
	}
	job := jobs.Items[0]
	pod := job.Spec.Template.Spec
	ctr := pod.Containers[0]
	switch {
	case job.Name != JobName("m1", 2) || *job.Spec.Completions != 3 || *job.Spec.Parallelism != 2 || *job.Spec.CompletionMode != batchv1.IndexedCompletion:
		t.Errorf("Job %s: %d completions, parallelism %d, mode %s; want 3 shards, 2 at once, Indexed", job.Name, *job.Spec.Completions, *job.Spec.Parallelism, *job.Spec.CompletionMode)
	case pod.ServiceAccountName != "movers" || !*pod.SecurityContext.RunAsNonRoot || !*ctr.SecurityContext.ReadOnlyRootFilesystem ||
		*ctr.SecurityContext.AllowPrivilegeEscalation || ctr.Resources.Limits.Memory().String() != "128Mi":
		t.Errorf("pod: service account %q, security %+v / %+v, limits %v", pod.ServiceAccountName, pod.SecurityContext, ctr.SecurityContext, ctr.Resources.Limits)
	case ctr.Image != "bucketkeeper:dev" || ctr.Args[0] != "mover":
		t.Errorf("container runs %s %v, want the operator's image's mover subcommand", ctr.Image, ctr.Args)
	}
	specCM := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: job.Name}, specCM); err != nil || len(specCM.OwnerReferences) != 1 || specCM.OwnerReferences[0].Name != job.Name {
		t.Errorf("the pass's spec ConfigMap: %+v (%v), want it owned by the Job", specCM.ObjectMeta, err)
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: credentialsSecretName("m1")}, secret); err != nil || string(secret.Data[CredentialsSourceSecretAccessKey]) != "SK" {
		t.Errorf("the move's keys: %v", err)
	}

	next := spec
	next.Pass, next.Mode = 3, ModeFinal
	if err := j.Start(ctx, Move{Spec: next, Source: keys, Target: keys}); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, jobs, client.InNamespace("ops")); err != nil || len(jobs.Items) != 1 || jobs.Items[0].Name != JobName("m1", 3) {
		t.Fatalf("after the next pass: %d Jobs (%v), want only pass 3's", len(jobs.Items), err)
	}

	if err := j.Forget(ctx, "m1"); !errors.Is(err, ErrStopping) {
		t.Fatalf("Forget with a Job running: %v, want ErrStopping", err)
	}
	if err := j.Forget(ctx, "m1"); err != nil {
		t.Fatalf("Forget once the Jobs are gone: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); err == nil {
		t.Error("the move's keys outlive Forget")
	}
}

// TestRunningShards: a pass runs at most as many shards at once as the store admins
// (the spec) and the operator (the runner's bound) allow, the smaller of the two.
func TestRunningShards(t *testing.T) {
	spec := func(boundaries, parallelism int) *Spec {
		s := &Spec{Mode: ModeCopy, Parallelism: parallelism}
		for i := range boundaries {
			s.Boundaries = append(s.Boundaries, string(rune('a'+i)))
		}
		return s
	}
	for _, tc := range []struct {
		spec  *Spec
		bound int
		want  int
	}{
		{spec(3, 0), 0, 4},
		{spec(3, 0), 2, 2},
		{spec(3, 1), 2, 1},
		{spec(3, 3), 2, 2},
		{spec(1, 8), 8, 2},
		{&Spec{Mode: ModePlan, Shards: 4, Parallelism: 2}, 0, 1},
	} {
		if got := runningShards(tc.spec, tc.bound); got != tc.want {
			t.Errorf("runningShards(%d shards, spec %d, bound %d) = %d, want %d", tc.spec.RunShards(), tc.spec.Parallelism, tc.bound, got, tc.want)
		}
	}
	j := &Jobs{Parallelism: 3}
	if got := *j.job(spec(3, 1), "p").Spec.Parallelism; got != 1 {
		t.Errorf("a Job of a spec bounded to 1 runs %d pods at once", got)
	}
}

// TestJobsDivideTheMovesBudgetAmongItsPods: each pod of a pass builds its own token
// bucket from the spec it reads, so the Job's spec carries the move's budget divided
// by the pods that run at once (the smaller of the runner's and the spec's bound),
// bursts at least one; a store without a budget stays without one.
func TestJobsDivideTheMovesBudgetAmongItsPods(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		runner, spec int32
		wantRPS      float64
		wantBurst    int
	}{
		{runner: 0, spec: 0, wantRPS: 3, wantBurst: 2},   // 4 shards at once
		{runner: 2, spec: 0, wantRPS: 6, wantBurst: 5},   // 2 at once
		{runner: 3, spec: 1, wantRPS: 12, wantBurst: 10}, // the store admins' 1
	} {
		c := fake.NewClientBuilder().WithScheme(scheme).Build()
		j := &Jobs{Client: c, Checkpoints: &ConfigMapCheckpoints{Client: c, Namespace: "ops"}, Namespace: "ops",
			Image: "bucketkeeper:dev", ServiceAccount: "movers", Parallelism: tc.runner}
		spec := Spec{MoveID: "m1", Mode: ModeCopy, Pass: 2, Boundaries: []string{"g", "p", "t"}, Parallelism: int(tc.spec),
			Source: Bucket{Endpoint: "http://src", Bucket: "b", RequestsPerSecond: 12, Burst: 10},
			Target: Bucket{Endpoint: "http://tgt", Bucket: "b"}}
		if err := j.Start(ctx, Move{Spec: spec}); err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: JobName("m1", 2)}, cm); err != nil {
			t.Fatal(err)
		}
		var written Spec
		if err := json.Unmarshal([]byte(cm.Data[jobSpecKey]), &written); err != nil {
			t.Fatal(err)
		}
		if written.Source.RequestsPerSecond != tc.wantRPS || written.Source.Burst != tc.wantBurst ||
			written.Target.RequestsPerSecond != 0 || written.Target.Burst != 0 {
			t.Errorf("runner bound %d, spec bound %d: each pod gets source %v/s burst %d, target %v/s burst %d; want source %v/s burst %d, target unlimited",
				tc.runner, tc.spec, written.Source.RequestsPerSecond, written.Source.Burst, written.Target.RequestsPerSecond, written.Target.Burst, tc.wantRPS, tc.wantBurst)
		}
	}
	if got := perPod(Spec{Source: Bucket{RequestsPerSecond: 1, Burst: 1}}, 4).Source; got.RequestsPerSecond != 0.25 || got.Burst != 1 {
		t.Errorf("a budget of 1/s among 4 pods: %v/s burst %d, want 0.25/s burst 1", got.RequestsPerSecond, got.Burst)
	}
}

// TestCappedResources: a mover pod gets the operator's CPU and memory, each lowered to
// the store admins' cap where there is one, and the cap where the operator set none.
func TestCappedResources(t *testing.T) {
	q := resource.MustParse
	own := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("128Mi")},
	}
	for _, tc := range []struct {
		own       corev1.ResourceRequirements
		caps      corev1.ResourceList
		cpu, mem  string
		unlimited bool
	}{
		{own: own, cpu: "1", mem: "128Mi"},
		{own: own, caps: corev1.ResourceList{corev1.ResourceMemory: q("96Mi")}, cpu: "1", mem: "96Mi"},
		{own: own, caps: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("1Gi")}, cpu: "1", mem: "128Mi"},
		{caps: corev1.ResourceList{corev1.ResourceCPU: q("500m")}, cpu: "500m", unlimited: true},
	} {
		got := cappedResources(tc.own, tc.caps)
		cpu, mem := got.Limits[corev1.ResourceCPU], got.Limits[corev1.ResourceMemory]
		_, hasMem := got.Limits[corev1.ResourceMemory]
		if cpu.Cmp(q(tc.cpu)) != 0 || (tc.unlimited == hasMem) || (!tc.unlimited && mem.Cmp(q(tc.mem)) != 0) {
			t.Errorf("caps %v on %v: limits %v", tc.caps, tc.own.Limits, got.Limits)
		}
		if !sameResources(got.Requests, got.Limits) {
			t.Errorf("caps %v: requests %v differ from limits %v", tc.caps, got.Requests, got.Limits)
		}
	}
}

func sameResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		if qb, ok := b[name]; !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}
