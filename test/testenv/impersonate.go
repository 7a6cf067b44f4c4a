package testenv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountClient makes a ServiceAccount in namespace with a Role of the given
// rules bound to it, and returns a client that acts as that ServiceAccount: admin's
// config impersonating it, with the groups its token would authenticate with. Tests
// attack the operator through it as a tenant would, with exactly the verbs a tenant
// has. The API server's authorizer learns of the Role from its own watch, so the
// caller waits for the first request it needs to succeed.
func ServiceAccountClient(ctx context.Context, admin client.Client, cfg *rest.Config, scheme *runtime.Scheme, namespace, name string, rules []rbacv1.PolicyRule) (client.Client, error) {
	objects := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		},
	}
	for _, o := range objects {
		if err := admin.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("testenv: create %T %s/%s: %w", o, namespace, name, err)
		}
	}
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	return client.New(as, client.Options{Scheme: scheme})
}
