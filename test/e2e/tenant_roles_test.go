package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// tenantVerbs are the verbs a request on a resource can carry.
var tenantVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// The threat model's tenant (docs/multi-tenancy.md), as Kubernetes' default roles give
// it once config/rbac/tenant_roles.yaml is aggregated into them: per resource (and
// subresource), the verbs a user bound to the role in one namespace holds there.
var (
	allVerbs   = tenantVerbs
	editGrants = map[string][]string{
		"storagebuckets":            allVerbs,
		"storagebuckets/finalizers": {"update"},
		"bucketaccesses":            allVerbs,
		"bucketaccesses/finalizers": {"update"},
		"secrets":                   allVerbs, // Kubernetes' own edit role
	}
	viewGrants = map[string][]string{
		"storagebuckets": {"get", "list", "watch"},
		"bucketaccesses": {"get", "list", "watch"},
	}
	// checkedResources is every (sub)resource whose verbs are held to the grants above:
	// what is not granted there must be refused.
	checkedResources = []string{
		"storagebuckets", "storagebuckets/status", "storagebuckets/finalizers",
		"bucketaccesses", "bucketaccesses/status", "bucketaccesses/finalizers",
		"objectstores", "objectstores/status", "objectstores/finalizers",
		"secrets",
	}
)

// TestTenantRolesAggregateIntoEditAndView applies the tenant ClusterRoles of
// config/rbac, runs kube-controller-manager's ClusterRole aggregation controller (the
// real one, from the test peers) against the suite's API server, binds one user to
// `edit` and another to `view` in a namespace, and asks the API server's authorizer
// every verb on every resource of bucketkeeper's and on Secrets: the editor holds
// exactly what the threat model says a tenant holds (every verb on StorageBuckets and
// BucketAccesses and their finalizers, none on their status, none on ObjectStores,
// Secrets as Kubernetes' edit gives them), the viewer only reads claims and accesses.
// Then both act for real: the editor creates a claim and strips its finalizer and is
// refused a status write; the viewer reads and is refused a write.
func TestTenantRolesAggregateIntoEditAndView(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, role := range tenantClusterRoles(t) {
		must(t, ignoreExists(k8s.Create(ctx, role)))
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), role) })
	}
	startControllerManager(t, cfg, "clusterrole-aggregation")
	waitAggregated(t, ctx, "edit", "storagebuckets", "create")
	waitAggregated(t, ctx, "view", "bucketaccesses", "list")

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "team-"}}
	must(t, k8s.Create(ctx, ns))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	editor, viewer := "alice-"+ns.Name, "bob-"+ns.Name
	for user, role := range map[string]string{editor: "edit", viewer: "view"} {
		must(t, k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}))
	}

	for user, grants := range map[string]map[string][]string{editor: editGrants, viewer: viewGrants} {
		waitGranted(t, ctx, user, grants, ns.Name)
		for _, res := range checkedResources {
			for _, verb := range tenantVerbs {
				want := slices.Contains(grants[res], verb)
				if got := userMay(t, ctx, user, verb, res, ns.Name); got != want {
					t.Errorf("%s (bound to %s in %s) %s %s: allowed %v, want %v", user, roleOf(user, editor), ns.Name, verb, res, got, want)
				}
			}
		}
		// Cluster-scoped: no ObjectStore verb, whatever the binding.
		for _, verb := range tenantVerbs {
			if userMay(t, ctx, user, verb, "objectstores", "") {
				t.Errorf("%s may %s objectstores cluster-wide", user, verb)
			}
		}
	}

	// The same, acted out.
	asEditor, asViewer := impersonating(t, editor), impersonating(t, viewer)
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "photos", Finalizers: []string{bkv1.Finalizer}},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "no-such-store"}}}
	must(t, asEditor.Create(ctx, sb))
	sb.Status.BucketName = "someone-elses-bucket"
	if err := asEditor.Status().Update(ctx, sb); !apierrors.IsForbidden(err) {
		t.Errorf("the editor's status write: %v, want Forbidden", err)
	}
	got := &bkv1.StorageBucket{}
	must(t, asViewer.Get(ctx, client.ObjectKeyFromObject(sb), got))
	if err := asViewer.Delete(ctx, got); !apierrors.IsForbidden(err) {
		t.Errorf("the viewer's delete: %v, want Forbidden", err)
	}
	if err := asViewer.List(ctx, &bkv1.ObjectStoreList{}); !apierrors.IsForbidden(err) {
		t.Errorf("the viewer's list of ObjectStores: %v, want Forbidden", err)
	}
	got.Finalizers = nil
	must(t, asEditor.Update(ctx, got)) // the threat model's tenant strips finalizers
	must(t, asEditor.Delete(ctx, got))
}

func roleOf(user, editor string) string {
	if user == editor {
		return "edit"
	}
	return "view"
}

// tenantClusterRoles reads the ClusterRoles of config/rbac/tenant_roles.yaml.
func tenantClusterRoles(t *testing.T) []*rbacv1.ClusterRole {
	t.Helper()
	root, err := testenv.RepoRoot()
	must(t, err)
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "tenant_roles.yaml"))
	must(t, err)
	var roles []*rbacv1.ClusterRole
	for _, doc := range strings.Split(string(data), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		must(t, yaml.UnmarshalStrict([]byte(doc), role))
		roles = append(roles, role)
	}
	if len(roles) != 2 {
		t.Fatalf("config/rbac/tenant_roles.yaml holds %d ClusterRoles, want bucketkeeper-edit and bucketkeeper-view", len(roles))
	}
	return roles
}

// waitAggregated waits until the default ClusterRole role grants verb on resource of
// bucketkeeper.io: the aggregation controller has folded the tenant roles in.
func waitAggregated(t *testing.T, ctx context.Context, role, resource, verb string) {
	t.Helper()
	must(t, testenv.Poll(ctx, func() error {
		cr := &rbacv1.ClusterRole{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: role}, cr); err != nil {
			return err
		}
		for _, r := range cr.Rules {
			if slices.Contains(r.APIGroups, bkv1.GroupVersion.Group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return nil
			}
		}
		return fmt.Errorf("ClusterRole %s does not grant %s on %s yet (%d rules)", role, verb, resource, len(cr.Rules))
	}))
}

// waitGranted waits until the API server's authorizer allows user every verb of
// grants in namespace: its RBAC cache has seen the RoleBinding just made and the
// aggregated ClusterRole's last rules, which it learns from a watch, a moment after
// they are written.
func waitGranted(t *testing.T, ctx context.Context, user string, grants map[string][]string, namespace string) {
	t.Helper()
	must(t, testenv.Poll(ctx, func() error {
		for res, verbs := range grants {
			for _, verb := range verbs {
				if !userMay(t, ctx, user, verb, res, namespace) {
					return fmt.Errorf("%s may not %s %s in %s yet", user, verb, res, namespace)
				}
			}
		}
		return nil
	}))
}

// userMay asks the API server's authorizer whether user may do verb on the resource
// ("name/subresource") of bucketkeeper.io, or on Secrets, in namespace.
func userMay(t *testing.T, ctx context.Context, user, verb, resource, namespace string) bool {
	t.Helper()
	res, sub, _ := strings.Cut(resource, "/")
	group := bkv1.GroupVersion.Group
	if res == "secrets" {
		group = ""
	}
	review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: group,
			Resource: res, Subresource: sub},
	}}
	must(t, k8s.Create(ctx, review))
	return review.Status.Allowed
}

// impersonating is a client acting as user, an authenticated user of no group.
func impersonating(t *testing.T, user string) client.Client {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cl, err := client.New(c, client.Options{Scheme: operator.Scheme()})
	must(t, err)
	return cl
}
