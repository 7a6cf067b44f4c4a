package soak_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/invariants"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestCheckerFindsEachBreach plants each kind of breach on the real API server and on
// every store (no operator runs: the test writes the operator's part itself) and
// expects the checker to report exactly it, and nothing for the clean objects planted
// beside them: a leaked bucket and a released one, a Ready claim and its bucket, a Ready
// claim whose bucket is gone, an access whose user holds its policy and key, the same
// user once its policy reaches further, a stray user, an orphan Secret and a claim stuck
// in deletion without saying why. It runs under a cluster id of its own, so the soak's
// objects are none of its concern, and judges only the objects it planted.
func TestCheckerFindsEachBreach(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	id := "chk-" + randomHex(4)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: id}}
	must(t, k8s.Create(ctx, ns))
	t.Cleanup(func() { removePlanted(t, ns.Name) })

	p := &planted{t: t, ctx: ctx, cluster: id, ns: ns, want: map[string]string{}, retained: map[types.UID]bool{}}
	var views []invariants.StoreView
	for _, srv := range servers {
		views = append(views, p.plantOnStore(srv))
	}
	p.plantInCluster()

	// The frozen copy of a gone claim is reported whatever its deletion policy was.
	retained := invariants.Retained(func(uid types.UID) bool { return p.retained[uid] })
	got := map[string]invariants.Violation{}
	for _, v := range invariants.Check(ctx, k8s, views, id, invariants.MoverNamespace(ns.Name), retained) {
		if v.Invariant == invariants.Unreadable {
			t.Errorf("the checker could not read: %s", v)
		}
		if p.mine(v.Object) {
			got[v.Object] = v
		}
	}
	for object, fragment := range p.want {
		v, found := got[object]
		switch {
		case fragment == "" && found:
			t.Errorf("clean %s reported: %s", object, v)
		case fragment != "" && !found:
			t.Errorf("planted breach of %s not found (want %q)", object, fragment)
		case fragment != "" && !strings.Contains(v.String(), fragment):
			t.Errorf("%s reported as %q, want it to say %q", object, v, fragment)
		}
		delete(got, object)
	}
	for _, v := range got {
		t.Errorf("unexpected finding: %s", v)
	}

	// A stuck claim that says why and what to do is not a breach.
	stuck := &bkv1.StorageBucket{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "stuck"}, stuck))
	stuck.Status.Conditions = []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionFalse, Reason: bkv1.ReasonBucketNotEmpty,
		Message:            "bucket x is not empty; to abandon the bucket instead, annotate this StorageBucket " + bkv1.AnnotationDeletionPolicy + "=" + bkv1.DeletionPolicyOrphan,
		LastTransitionTime: metav1.Now()}}
	must(t, k8s.Status().Update(ctx, stuck))
	for _, v := range invariants.Check(ctx, k8s, views, id, invariants.MoverNamespace(ns.Name), retained) {
		if v.Object == "storagebucket "+ns.Name+"/stuck" {
			t.Errorf("an explained deletion was reported: %s", v)
		}
	}
}

// planted records what the test planted: want maps each object (as the checker names
// it) to a fragment its finding must hold, "" for an object that must not be reported.
type planted struct {
	t       *testing.T
	ctx     context.Context
	cluster string
	ns      *corev1.Namespace
	want    map[string]string
	// retained: the gone claims the test says were deleted with Retain.
	retained map[types.UID]bool
}

func (p *planted) mine(object string) bool {
	if _, ok := p.want[object]; ok {
		return true
	}
	return strings.Contains(object, p.ns.Name) || strings.Contains(object, p.cluster)
}

// plantOnStore plants the bucket and identity breaches on srv, under an ObjectStore of
// the test's, and returns the store's view.
func (p *planted) plantOnStore(srv *testenv.S3Server) invariants.StoreView {
	t, ctx := p.t, p.ctx
	name := p.cluster + "-" + string(srv.Kind)
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: bkv1.ObjectStoreSpec{Endpoint: srv.Endpoint}}
	must(t, k8s.Create(ctx, store))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), store) })
	admin, err := s3.New(ctx, s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey})
	must(t, err)
	iamc := srv.IAMClient()
	view := invariants.StoreView{Name: name, S3: admin, IAM: invariants.SDKIAM{Client: iamc}}
	nsUID := string(p.ns.UID)
	bucket := func(suffix string, tags map[string]string) string {
		b := name + "-" + suffix
		must(t, admin.CreateBucket(ctx, b, ""))
		t.Cleanup(func() { _ = admin.DeleteBucket(context.Background(), b) })
		must(t, admin.PutBucketTagging(ctx, b, tags))
		return b
	}
	object := func(kind, n string) string { return kind + " " + name + "/" + n }

	// A bucket whose claim is gone and was not released; one released; another cluster's.
	leaked := bucket("leaked", map[string]string{bkv1.TagCluster: p.cluster, bkv1.TagClaim: p.ns.Name + "/gone", bkv1.TagUID: string(uuid.NewUUID()) + "/" + nsUID})
	p.want[object("bucket", leaked)] = "no longer exists"
	released := bucket("released", map[string]string{bkv1.TagCluster: p.cluster, bkv1.TagClaim: p.ns.Name + "/old", bkv1.TagUID: "/" + nsUID})
	p.want[object("bucket", released)] = ""

	// A Ready claim and its bucket; a Ready claim whose bucket is gone.
	live := p.readyClaim("live-"+string(srv.Kind), name, name+"-live")
	bound := bucket("live", map[string]string{bkv1.TagCluster: p.cluster, bkv1.TagClaim: p.ns.Name + "/" + live.Name, bkv1.TagUID: string(live.UID) + "/" + nsUID})
	p.want[object("bucket", bound)] = ""
	p.want["storagebucket "+p.ns.Name+"/"+live.Name] = ""
	lost := p.readyClaim("lost-"+string(srv.Kind), name, name+"-lost")
	p.want["storagebucket "+p.ns.Name+"/"+lost.Name] = "is not on store"

	// An access over the live claim whose user holds its key and the operator's policy
	// for the grant: clean. Another whose user's policy reaches a second bucket and
	// writes where the grant says ReadOnly.
	good := p.readyAccess("good-"+string(srv.Kind), live.Name)
	goodUser := p.user(iamc, iam.UserName(p.cluster, string(good.UID)), []iam.Grant{{Bucket: bound, Mode: iam.ReadOnly}}, good)
	p.want[object("user", goodUser)] = ""
	wide := p.readyAccess("wide-"+string(srv.Kind), live.Name)
	wideUser := p.user(iamc, iam.UserName(p.cluster, string(wide.UID)), []iam.Grant{{Bucket: bound, Mode: iam.ReadWrite}, {Bucket: released, Mode: iam.ReadOnly}}, wide)
	p.want[object("user", wideUser)] = "s3:PutObject on arn:aws:s3:::" + bound + "/*"
	// A user named as this cluster names them, of no access.
	stray := p.user(iamc, iam.UserName(p.cluster, string(uuid.NewUUID())), []iam.Grant{{Bucket: leaked, Mode: iam.ReadWrite}}, nil)
	p.want[object("user", stray)] = "belongs to no live BucketAccess"

	// A copy a move left behind, frozen, of a claim that is gone (deleted with Retain,
	// as the test says), not released; and one released.
	gone := uuid.NewUUID()
	p.retained[gone] = true
	copyTags := func(uid string) map[string]string {
		return map[string]string{bkv1.TagCluster: p.cluster, bkv1.TagClaim: p.ns.Name + "/moved", bkv1.TagUID: uid, bkv1.TagMovedTo: "elsewhere/" + name}
	}
	frozen := bucket("frozen", copyTags(string(gone)+"/"+nsUID))
	p.freeze(admin, frozen)
	p.want[object("bucket", frozen)] = "frozen by a move"
	releasedCopy := bucket("copy", copyTags("/"+nsUID))
	p.freeze(admin, releasedCopy)
	p.want[object("bucket", releasedCopy)] = ""

	// A role named as this cluster names them, of no access, where the store has roles.
	role := iam.UserName(p.cluster, string(uuid.NewUUID()))
	if p.role(iamc, role) {
		p.want[object("role", role)] = "belongs to no live BucketAccess"
	}
	return view
}

// freeze puts a move's freeze into bucket's policy, as the cutover does.
func (p *planted) freeze(admin s3.Client, bucket string) {
	doc := `{"Version":"2012-10-17","Statement":[{"Sid":"` + bkv1.MoveFreezeSid + `","Effect":"Deny","Principal":"*","Action":["s3:PutObject","s3:DeleteObject"],"Resource":["arn:aws:s3:::` + bucket + `/*"]}]}`
	must(p.t, admin.PutBucketPolicy(p.ctx, bucket, doc))
	p.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = admin.DeleteBucketPolicy(ctx, bucket)
	})
}

// role makes an IAM role, as the operator makes one for a keyless access, and says
// whether the store has roles at all.
func (p *planted) role(c *awsiam.Client, name string) bool {
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":["arn:aws:iam:::oidc-provider/issuer.test"]},"Action":["sts:AssumeRoleWithWebIdentity"]}]}`
	_, err := c.CreateRole(p.ctx, &awsiam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trust)})
	if err != nil {
		p.t.Logf("no role planted (%v): the store's IAM makes none for this account", err)
		return false
	}
	p.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.DeleteRole(ctx, &awsiam.DeleteRoleInput{RoleName: aws.String(name)})
	})
	return true
}

// readyClaim makes a StorageBucket on store whose status says it is Ready with bucket.
func (p *planted) readyClaim(name, store, bucket string) *bkv1.StorageBucket {
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns.Name, Name: name},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: store}}}
	must(p.t, k8s.Create(p.ctx, sb))
	sb.Status.BucketName = bucket
	sb.Status.Conditions = []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady, Message: "planted", LastTransitionTime: metav1.Now()}}
	must(p.t, k8s.Status().Update(p.ctx, sb))
	return sb
}

// readyAccess makes a BucketAccess over claim, ReadOnly, Ready as far as its status says.
func (p *planted) readyAccess(name, claim string) *bkv1.BucketAccess {
	ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns.Name, Name: name},
		Spec: bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: claim, Mode: bkv1.AccessReadOnly}}, SecretName: name + "-key"}}
	must(p.t, k8s.Create(p.ctx, ba))
	return ba
}

// user makes an IAM user with the operator's policy for grants and one key; with an
// access, the key goes into the access's status as the operator would put it.
func (p *planted) user(c *awsiam.Client, user string, grants []iam.Grant, ba *bkv1.BucketAccess) string {
	t, ctx := p.t, p.ctx
	_, err := c.CreateUser(ctx, &awsiam.CreateUserInput{UserName: aws.String(user)})
	must(t, err)
	t.Cleanup(func() { deleteUser(c, user) })
	doc, err := iam.PolicyDocument(grants)
	must(t, err)
	_, err = c.PutUserPolicy(ctx, &awsiam.PutUserPolicyInput{UserName: aws.String(user), PolicyName: aws.String(iam.PolicyName), PolicyDocument: aws.String(doc)})
	must(t, err)
	key, err := c.CreateAccessKey(ctx, &awsiam.CreateAccessKeyInput{UserName: aws.String(user)})
	must(t, err)
	if ba != nil {
		ba.Status.AccessKeyID = aws.ToString(key.AccessKey.AccessKeyId)
		ba.Status.Conditions = []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady, Message: "planted", LastTransitionTime: metav1.Now()}}
		must(t, k8s.Status().Update(ctx, ba))
	}
	return user
}

// deleteUser removes a planted user, its keys and policy.
func deleteUser(c *awsiam.Client, user string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if keys, err := c.ListAccessKeys(ctx, &awsiam.ListAccessKeysInput{UserName: aws.String(user)}); err == nil {
		for _, k := range keys.AccessKeyMetadata {
			_, _ = c.DeleteAccessKey(ctx, &awsiam.DeleteAccessKeyInput{UserName: aws.String(user), AccessKeyId: k.AccessKeyId})
		}
	}
	_, _ = c.DeleteUserPolicy(ctx, &awsiam.DeleteUserPolicyInput{UserName: aws.String(user), PolicyName: aws.String(iam.PolicyName)})
	_, _ = c.DeleteUser(ctx, &awsiam.DeleteUserInput{UserName: aws.String(user)})
}

// plantInCluster plants the breaches that live in the cluster alone: a connection
// Secret whose claim is gone, a Secret labelled as the operator's with no owner, and a
// claim whose deletion waits on the operator's finalizer without a word.
func (p *planted) plantInCluster() {
	t, ctx, ns := p.t, p.ctx, p.ns.Name
	yes := true
	orphan := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone-bucket",
		Labels:          map[string]string{bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelSecretRole: bkv1.SecretRoleConnection},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: bkv1.GroupVersion.String(), Kind: "StorageBucket", Name: "gone", UID: uuid.NewUUID(), Controller: &yes}}}}
	must(t, k8s.Create(ctx, orphan))
	p.want["secret "+ns+"/gone-bucket"] = "is gone"
	loose := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loose",
		Labels: map[string]string{bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelSecretRole: bkv1.SecretRoleAccess}}}
	must(t, k8s.Create(ctx, loose))
	p.want["secret "+ns+"/loose"] = "controlled by no object"

	stuck := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stuck", Finalizers: []string{bkv1.Finalizer}},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: p.cluster + "-" + string(servers[0].Kind)}}}
	must(t, k8s.Create(ctx, stuck))
	must(t, k8s.Delete(ctx, stuck))
	p.want["storagebucket "+ns+"/stuck"] = "no Ready condition"

	// The movers' objects (the test's namespace stands for the operator's): those of a
	// move whose claim is gone, each reported, and those of a live claim's move.
	moving := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moving"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: p.cluster + "-" + string(servers[0].Kind)}}}
	must(t, k8s.Create(ctx, moving))
	current := strings.ReplaceAll(string(moving.UID), "-", "") + "-1"
	moving.Status.Move = &bkv1.MoveStatus{ID: current, From: moving.Spec.ObjectStoreRef.Name, To: "elsewhere", Phase: bkv1.MoveCopying}
	must(t, k8s.Status().Update(ctx, moving))
	for _, objs := range [][]string{p.moverObjects(current), p.moverObjects(strings.ReplaceAll(string(uuid.NewUUID()), "-", "") + "-1")} {
		fragment := "no longer exists"
		if strings.Contains(objs[0], current) {
			fragment = ""
		}
		for _, object := range objs {
			p.want[object] = fragment
		}
	}
	if !slices.Contains(stuck.Finalizers, bkv1.Finalizer) {
		t.Fatal("the stuck claim lost its finalizer")
	}
}

// moverObjects makes, in the test's namespace, what the Jobs runner and the records
// make for move id (a Job, its spec, the keys' Secret, the record) and a checkpoint,
// and returns them as the checker names them.
func (p *planted) moverObjects(id string) []string {
	t, ctx, ns := p.t, p.ctx, p.ns.Name
	jobs := &mover.Jobs{Client: k8s, Checkpoints: &mover.ConfigMapCheckpoints{Client: k8s, Namespace: ns}, Namespace: ns, Image: "bucketkeeper:test", ServiceAccount: "movers"}
	runner := &mover.Recorded{Runner: jobs, Client: k8s, Namespace: ns}
	spec := mover.Spec{MoveID: id, Mode: mover.ModeCopy, Pass: 2,
		Source: mover.Bucket{Endpoint: servers[0].Endpoint, Bucket: "src"}, Target: mover.Bucket{Endpoint: servers[1].Endpoint, Bucket: "tgt"}}
	keys := mover.Credentials{AccessKeyID: "placeholder", SecretAccessKey: "placeholder"}
	must(t, runner.Start(ctx, mover.Move{Spec: spec, Source: keys, Target: keys}))
	must(t, jobs.Checkpoints.Save(ctx, &mover.Checkpoint{MoveID: id, Shard: 0, Pass: 2, Mode: mover.ModeCopy}))
	return []string{"job " + ns + "/" + mover.JobName(id, 2), "configmap " + ns + "/" + mover.JobName(id, 2),
		"secret " + ns + "/" + bkv1.MoveCheckpointPrefix + id + "-credentials", "configmap " + ns + "/" + mover.RecordName(id),
		"configmap " + ns + "/" + mover.CheckpointName(id, 0)}
}

// removePlanted deletes the test's namespace with everything in it, the finalizers of
// the planted claims stripped (no operator handles them), and finalizes it as the
// namespace controller would: the soak that runs next must not meet them.
func removePlanted(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs := &bkv1.StorageBucketList{}
	if err := k8s.List(ctx, sbs, client.InNamespace(name)); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	for i := range sbs.Items {
		sb := &sbs.Items[i]
		if controllerutil.RemoveFinalizer(sb, bkv1.Finalizer) {
			_ = k8s.Update(ctx, sb)
		}
	}
	for _, obj := range []client.Object{&bkv1.StorageBucket{}, &bkv1.BucketAccess{}, &corev1.Secret{}, &corev1.ConfigMap{}, &batchv1.Job{}} {
		if err := k8s.DeleteAllOf(ctx, obj, client.InNamespace(name)); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	must(t, client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})))
	must(t, poll(ctx, 30*time.Second, func() error {
		ns := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			return client.IgnoreNotFound(err)
		}
		if len(ns.Spec.Finalizers) > 0 {
			ns.Spec.Finalizers = nil
			if err := k8s.SubResource("finalize").Update(ctx, ns); err != nil {
				return err
			}
		}
		return fmt.Errorf("namespace %s still there", name)
	}))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
