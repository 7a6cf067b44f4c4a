package manifests

import (
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// tenantRoles are the ClusterRoles both renderings ship for application teams, with the
// aggregation labels that fold them into Kubernetes' default roles and exactly the
// rules the threat model assumes (docs/multi-tenancy.md): every verb on claims and
// accesses and their finalizers, no status, nothing cluster-scoped; view reads them.
// The e2e suite proves what a user bound to edit and view may do on a real API server
// whose controller-manager aggregates them.
var tenantRoles = map[string]struct {
	labels []string
	rules  []string
}{
	"bucketkeeper-edit": {
		labels: []string{"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit"},
		rules: expandRules([]rbacv1.PolicyRule{
			{APIGroups: []string{"bucketkeeper.io"}, Resources: []string{"storagebuckets", "bucketaccesses"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}},
			{APIGroups: []string{"bucketkeeper.io"}, Resources: []string{"storagebuckets/finalizers", "bucketaccesses/finalizers"}, Verbs: []string{"update"}},
		}),
	},
	"bucketkeeper-view": {
		labels: []string{"rbac.authorization.k8s.io/aggregate-to-view"},
		rules: expandRules([]rbacv1.PolicyRule{
			{APIGroups: []string{"bucketkeeper.io"}, Resources: []string{"storagebuckets", "bucketaccesses"}, Verbs: []string{"get", "list", "watch"}},
		}),
	},
}

// TestTenantRolesAggregate: config/default and the chart (by default) ship the tenant
// ClusterRoles, labelled for aggregation, with exactly their rules; the chart leaves
// them out with rbac.aggregateClusterRoles=false.
func TestTenantRolesAggregate(t *testing.T) {
	for source, objs := range renderings(t) {
		for name, want := range tenantRoles {
			var role *unstructured.Unstructured
			for _, o := range findAll(objs, "ClusterRole") {
				if o.GetName() == name {
					role = o
				}
			}
			if role == nil {
				t.Errorf("%s: no ClusterRole %s", source, name)
				continue
			}
			for _, l := range want.labels {
				if role.GetLabels()[l] != "true" {
					t.Errorf("%s: ClusterRole %s lacks the label %s: \"true\"", source, name, l)
				}
			}
			for l := range role.GetLabels() {
				if strings.HasPrefix(l, "rbac.authorization.k8s.io/aggregate-to-") && !contains(want.labels, l) {
					t.Errorf("%s: ClusterRole %s aggregates into more than it should: %s", source, name, l)
				}
			}
			if got := expandRules(into[rbacv1.ClusterRole](t, role).Rules); !reflect.DeepEqual(got, want.rules) {
				t.Errorf("%s: ClusterRole %s grants\n  %s\nwant\n  %s", source, name, strings.Join(got, "\n  "), strings.Join(want.rules, "\n  "))
			}
		}
	}
	objs := renderChart(t, map[string]any{"rbac": map[string]any{"aggregateClusterRoles": false}}).Objects
	for _, o := range findAll(objs, "ClusterRole") {
		if _, ok := tenantRoles[o.GetName()]; ok {
			t.Errorf("rbac.aggregateClusterRoles=false still renders %s", o.GetName())
		}
	}
}
