package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

const (
	operatorNamespace = "bucketkeeper-system"
	operatorSA        = "bucketkeeper"
	operatorUser      = "system:serviceaccount:" + operatorNamespace + ":" + operatorSA
)

// operatorGroups are the groups a real token of the service account carries.
var operatorGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"}

// TestLeastPrivilegeRBAC runs the operator as its service account with nothing but the
// generated ClusterRole and Role (of its namespace) and a leader-election Role, so a permission the code needs but
// the kubebuilder markers forgot fails here rather than in a cluster. Then it takes
// one verb away and checks the claim says so in words a person can act on.
func TestLeastPrivilegeRBAC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	must(t, ignoreExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})))
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: operatorSA}})
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: operatorNamespace, Name: operatorSA}

	role := &rbacv1.ClusterRole{}
	decodeManifest(t, "role.yaml", "ClusterRole", role)
	granted := role.DeepCopy()
	create(t, role)
	create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{sa},
	})
	// The Role the markers generate beside the ClusterRole: the movers' objects and the
	// moves' records in the operator's own namespace.
	manager := &rbacv1.Role{}
	decodeManifest(t, "role.yaml", "Role", manager)
	manager.Namespace = operatorNamespace
	create(t, manager)
	create(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: manager.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: manager.Name},
		Subjects:   []rbacv1.Subject{sa},
	})
	le := leaderElectionRole(t)
	create(t, le)
	create(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: le.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: le.Name},
		Subjects:   []rbacv1.Subject{sa},
	})
	// RBAC is really enforced: the service account may not read ConfigMaps.
	if allowed(t, ctx, "list", "configmaps", "default") {
		t.Fatalf("%s may list ConfigMaps: the control plane does not enforce RBAC, so this test proves nothing", operatorUser)
	}

	// The API server's authorizer learns of new bindings from its own watch: wait until
	// it grants what both bindings give, so nothing the manager does at once (the move
	// sweep lists mover Jobs at start) is refused for a binding not yet seen.
	granting := func(group, verb, resource string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			return allowedIn(t, ctx, group, verb, resource, operatorNamespace), nil
		}
	}
	for _, g := range [][3]string{{"batch", "list", "jobs"}, {"coordination.k8s.io", "get", "leases"}} {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, granting(g[0], g[1], g[2])); err != nil {
			t.Fatalf("the API server never granted %s %s.%s in %s to %s: %v", g[1], g[2], g[0], operatorNamespace, operatorUser, err)
		}
	}

	logMark := logs.Len()
	asOperator := rest.CopyConfig(cfg)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: operatorUser, Groups: operatorGroups}
	const leaseName = "e2e-least-privilege"
	startManager(t, asOperator, operator.Options{
		// The defaults' lease timings: the test needs the lease taken and renewed (its
		// verbs), not a fast takeover, and a 3-second renew deadline on a loaded machine
		// lost the lease and stopped the manager mid-test.
		LeaderElection: true, LeaderElectionNamespace: operatorNamespace, LeaderElectionID: leaseName,
	})
	f := newFixture(t, operatorNamespace)

	// The whole life of a claim, as the service account.
	sb := f.bucket("allowed", nil)
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, "", 90*time.Second)
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded, 60*time.Second)
	bucket := got.Status.BucketName
	conn := &corev1.Secret{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: got.Status.ConnectionSecretName}, conn))
	if string(conn.Data[bkv1.SecretKeyBucketName]) != bucket {
		t.Errorf("connection Secret %s has %s=%q, want %q", conn.Name, bkv1.SecretKeyBucketName, conn.Data[bkv1.SecretKeyBucketName], bucket)
	}
	lease := &coordinationv1.Lease{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: leaseName}, lease))
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("Lease %s/%s has no holder", operatorNamespace, leaseName)
	}
	if _, err := f.s3.HeadBucket(ctx, bucket); err != nil {
		t.Fatalf("bucket %s on SeaweedFS: %v", bucket, err)
	}
	must(t, k8s.Delete(ctx, got))
	f.waitGone(got, 60*time.Second)
	if _, err := f.s3.HeadBucket(ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("after deleting the claim (deletionPolicy Delete), HeadBucket %s = %v, want NotFound", bucket, err)
	}

	// Nothing was refused along the way, not even what is only logged (events, lease).
	for _, line := range strings.Split(logs.From(logMark), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("refused with the full ClusterRole: %s", line)
		}
	}

	// Take one verb away: the operator may no longer create Secrets.
	reduced := granted.DeepCopy()
	removed := false
	for i, r := range reduced.Rules {
		if slices.Contains(r.Resources, "secrets") && slices.Contains(r.Verbs, "create") {
			reduced.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "create" })
			removed = true
		}
	}
	if !removed {
		t.Fatalf("ClusterRole %s grants no create on secrets; the operator could never write a connection Secret", role.Name)
	}
	setRules(t, ctx, role.Name, reduced.Rules)
	f.eventually(30*time.Second, "the API server to apply the reduced ClusterRole", func() error {
		if allowed(t, ctx, "create", "secrets", f.ns) {
			return errors.New("still allowed to create secrets")
		}
		return nil
	})

	denied := f.bucket("denied", nil)
	got = f.waitCondition(denied, bkv1.ConditionReady, metav1.ConditionFalse, "", 60*time.Second)
	f.eventually(60*time.Second, "Ready=False naming the refusal on "+denied.Name, func() error {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(denied), got))
		if c := apimeta.FindStatusCondition(got.Status.Conditions, bkv1.ConditionReady); c == nil || !strings.Contains(c.Message, "forbidden") {
			return fmt.Errorf("conditions: %s", testenv.DescribeConditions(got.Status.Conditions))
		}
		return nil
	})
	ready := apimeta.FindStatusCondition(got.Status.Conditions, bkv1.ConditionReady)
	t.Logf("without create on secrets: Ready=%s reason=%s message=%q", ready.Status, ready.Reason, ready.Message)
	if ready.Reason != bkv1.ReasonForbidden {
		t.Errorf("Ready reason = %q, want %q", ready.Reason, bkv1.ReasonForbidden)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, bkv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("Stalled=True (%s); a missing permission is retried, so fixing the Role must be enough", c.Message)
	}
	// It stays that way while the verb is missing: retries do not paper over it. Wait
	// for two more refused attempts (each logged as a reconcile error) and look again.
	retryMark := logs.Len()
	f.eventually(60*time.Second, "two more refused attempts on "+denied.Name, func() error {
		n := 0
		for _, line := range strings.Split(logs.From(retryMark), "\n") {
			if strings.Contains(line, "Reconciler error") && strings.Contains(line, denied.Name) && strings.Contains(strings.ToLower(line), "forbidden") {
				n++
			}
		}
		if n < 2 {
			return fmt.Errorf("%d refused attempts logged", n)
		}
		return nil
	})
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(denied), got))
	if apimeta.IsStatusConditionTrue(got.Status.Conditions, bkv1.ConditionReady) {
		t.Fatalf("became Ready without create on secrets: %s", testenv.DescribeConditions(got.Status.Conditions))
	}

	// Giving the verb back is enough: the retry with backoff finishes the claim.
	setRules(t, ctx, role.Name, granted.Rules)
	f.waitCondition(denied, bkv1.ConditionReady, metav1.ConditionTrue, "", 90*time.Second)
}

// create makes obj as the admin and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	must(t, k8s.Create(context.Background(), obj))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

func setRules(t *testing.T, ctx context.Context, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	cr := &rbacv1.ClusterRole{}
	must(t, k8s.Get(ctx, client.ObjectKey{Name: name}, cr))
	cr.Rules = rules
	must(t, k8s.Update(ctx, cr))
}

// allowed asks the API server's authorizer (a SubjectAccessReview) whether the
// operator's service account may do verb on resource in namespace.
func allowed(t *testing.T, ctx context.Context, verb, resource, namespace string) bool {
	t.Helper()
	return allowedIn(t, ctx, "", verb, resource, namespace)
}

// allowedIn is allowed for a resource of an API group.
func allowedIn(t *testing.T, ctx context.Context, group, verb, resource, namespace string) bool {
	t.Helper()
	review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:               operatorUser,
		Groups:             operatorGroups,
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: namespace, Group: group, Verb: verb, Resource: resource},
	}}
	must(t, k8s.Create(ctx, review))
	return review.Status.Allowed
}

// leaderElectionRole is config/rbac/leader_election_role.yaml when it exists, else the
// Role kubebuilder projects ship, defined here (both core and events.k8s.io Events, as
// client-go's lease lock records with the core API).
func leaderElectionRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	role := &rbacv1.Role{}
	if decodeManifest(t, "leader_election_role.yaml", "Role", role) {
		t.Logf("leader-election Role from config/rbac/leader_election_role.yaml")
	} else {
		t.Logf("config/rbac/leader_election_role.yaml does not exist: using the test's own leader-election Role")
		role.Name = "bucketkeeper-leader-election"
		role.Rules = []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		}
	}
	role.Namespace = operatorNamespace
	return role
}

// decodeManifest decodes the first object of kind from config/rbac/file into obj; it
// reports false if the file does not exist.
func decodeManifest(t *testing.T, file, kind string, obj client.Object) bool {
	t.Helper()
	root, err := testenv.RepoRoot()
	must(t, err)
	path := filepath.Join(root, "config", "rbac", file)
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return false
	}
	must(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
	for {
		doc := map[string]any{}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s holds no %s", path, kind)
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc["kind"] != kind {
			continue
		}
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(doc, obj))
		return true
	}
}
