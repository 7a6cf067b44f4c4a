package invariants

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// checkSecrets holds SecretOwned: every Secret the operator wrote (a connection or an
// access Secret; the credentials Secrets it labels are the store admin's) is controlled
// by a live StorageBucket or BucketAccess of its namespace that still names it.
//
// Kubernetes' garbage collector removes a Secret whose owner is gone; a control plane
// without one (a test's) must run its equivalent before checking (see test/soak).
func checkSecrets(snap *snapshot) []Violation {
	var out []Violation
	for i := range snap.secrets {
		s := &snap.secrets[i]
		role := s.Labels[bkv1.LabelSecretRole]
		if role == bkv1.SecretRoleCredentials {
			continue
		}
		if found := secretOwned(snap, s.Namespace, s.Name, role, metav1.GetControllerOf(s)); found != "" {
			out = append(out, Violation{Invariant: SecretOwned, Object: "secret " + s.Namespace + "/" + s.Name, Found: found})
		}
	}
	return out
}

func secretOwned(snap *snapshot, namespace, name, role string, owner *metav1.OwnerReference) string {
	if owner == nil {
		return fmt.Sprintf("labelled as the operator's (role %q) but controlled by no object", role)
	}
	switch owner.Kind {
	case "StorageBucket":
		sb := snap.bucketByUID[owner.UID]
		switch {
		case sb == nil || sb.Namespace != namespace:
			return fmt.Sprintf("its owner StorageBucket %s (uid %s) is gone", owner.Name, owner.UID)
		case role != bkv1.SecretRoleConnection:
			return fmt.Sprintf("controlled by StorageBucket %s but labelled role %q", sb.Name, role)
		case sb.Status.ConnectionSecretName != "" && sb.Status.ConnectionSecretName != name:
			return fmt.Sprintf("StorageBucket %s now writes its connection details to Secret %s: this one is stale", sb.Name, sb.Status.ConnectionSecretName)
		}
	case "BucketAccess":
		ba := snap.accessByUID[owner.UID]
		switch {
		case ba == nil || ba.Namespace != namespace:
			return fmt.Sprintf("its owner BucketAccess %s (uid %s) is gone", owner.Name, owner.UID)
		case role != bkv1.SecretRoleAccess:
			return fmt.Sprintf("controlled by BucketAccess %s but labelled role %q", ba.Name, role)
		case ba.Spec.SecretName != name && holdsSecret(snap, ba):
			// Until the Secret of its new name holds the key (an access waiting on its
			// buckets writes none), the one of the earlier name keeps it for the
			// applications that read it.
			return fmt.Sprintf("BucketAccess %s now writes its key to Secret %s: this one is stale", ba.Name, ba.Spec.SecretName)
		}
	default:
		return fmt.Sprintf("labelled as the operator's but controlled by %s %s", owner.Kind, owner.Name)
	}
	return ""
}

// holdsSecret says whether the Secret an access names (spec.secretName) is there,
// controlled by the access.
func holdsSecret(snap *snapshot, ba *bkv1.BucketAccess) bool {
	for i := range snap.secrets {
		s := &snap.secrets[i]
		if s.Namespace == ba.Namespace && s.Name == ba.Spec.SecretName && metav1.IsControlledBy(s, ba) {
			return true
		}
	}
	return false
}
