package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

func readFile(t testing.TB, rel string) []byte {
	t.Helper()
	return readFileAbs(t, filepath.Join(repoRoot(t), rel))
}

func readFileAbs(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSecurityAndAvailability pins the deployment's hardening and availability
// settings in each rendering: restricted-PSS security contexts, requests and limits,
// health probes on :8081, two leader-elected replicas with a PDB, HTTPS metrics.
func TestSecurityAndAvailability(t *testing.T) {
	for name, objs := range renderings(t) {
		t.Run(name, func(t *testing.T) { checkSecurityAndAvailability(t, objs) })
	}
}

func checkSecurityAndAvailability(t *testing.T, objs []*unstructured.Unstructured) {
	d, c := manager(t, objs)
	pod := d.Spec.Template.Spec

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", psc)
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("manager container has no securityContext")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation must be false")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem must be true")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532:
		t.Error("the container must run as non-root user 65532")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("privileged must not be set")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0:
		t.Errorf("capabilities = %+v, want drop [ALL] and no add", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("container seccompProfile must be RuntimeDefault")
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[res]; !ok {
			t.Errorf("no %s request", res)
		}
		if _, ok := c.Resources.Limits[res]; !ok {
			t.Errorf("no %s limit", res)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	checkProbe := func(kind string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			t.Errorf("%s must GET %s, got %+v", kind, path, p)
			return
		}
		port := p.HTTPGet.Port.IntVal
		if p.HTTPGet.Port.StrVal != "" {
			port = ports[p.HTTPGet.Port.StrVal]
		}
		if port != 8081 {
			t.Errorf("%s targets port %v (%d), want 8081", kind, p.HTTPGet.Port.String(), port)
		}
	}
	checkProbe("livenessProbe", c.LivenessProbe, "/healthz")
	checkProbe("readinessProbe", c.ReadinessProbe, "/readyz")

	flags := parseArgs(t, c.Args)
	for flag, want := range map[string]string{
		"leader-elect": "true", "metrics-secure": "true",
		"metrics-bind-address": ":8443", "health-probe-bind-address": ":8081",
	} {
		if flags[flag] != want {
			t.Errorf("--%s=%q, want %q", flag, flags[flag], want)
		}
	}
	if ports["metrics"] != 8443 {
		t.Errorf("metrics container port = %d, want 8443", ports["metrics"])
	}

	podLabels := labels.Set(d.Spec.Template.Labels)
	if sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels); !sel.Matches(podLabels) {
		t.Errorf("the Deployment's selector %v does not match its pods %v", sel, podLabels)
	}
	pdb := into[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget"))
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget minAvailable = %v, want 1", pdb.Spec.MinAvailable)
	}
	if sel := labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels); !sel.Matches(podLabels) {
		t.Errorf("the PodDisruptionBudget's selector %v does not match the pods %v", sel, podLabels)
	}

	svc := into[corev1.Service](t, find(t, objs, "Service"))
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service %s does not select the manager pods", svc.Name)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.StrVal != "metrics" {
		t.Errorf("Service %s ports = %+v, want 8443 -> metrics", svc.Name, svc.Spec.Ports)
	}

	// The manager's ServiceAccount, and with mover Jobs (the chart's default) the
	// movers' own: theirs may write ConfigMaps of the namespace and nothing else.
	var sa *corev1.ServiceAccount
	for _, o := range findAll(objs, "ServiceAccount") {
		switch s := into[corev1.ServiceAccount](t, o); {
		case s.Name == pod.ServiceAccountName:
			sa = s
		case strings.HasSuffix(s.Name, "-mover"):
			checkMoverRBAC(t, objs, s)
		default:
			t.Errorf("unexpected ServiceAccount %s", s.Name)
		}
	}
	if sa == nil {
		t.Fatalf("no ServiceAccount %q for the pods", pod.ServiceAccountName)
	}
	if sa.Namespace != namespace || d.Namespace != namespace {
		t.Errorf("namespaces: ServiceAccount %q, Deployment %q, want %q", sa.Namespace, d.Namespace, namespace)
	}
	if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Error("the manager needs its ServiceAccount token: automountServiceAccountToken must be true")
	}
}

// checkMoverRBAC: the movers' ServiceAccount is bound to one Role of its namespace
// that lets it create, read and update ConfigMaps (the moves' checkpoints), no more.
func checkMoverRBAC(t *testing.T, objs []*unstructured.Unstructured, sa *corev1.ServiceAccount) {
	t.Helper()
	bound := 0
	for _, o := range findAll(objs, "RoleBinding") {
		rb := into[rbacv1.RoleBinding](t, o)
		for _, s := range rb.Subjects {
			if s.Kind != "ServiceAccount" || s.Name != sa.Name {
				continue
			}
			bound++
			for _, r := range findAll(objs, "Role") {
				role := into[rbacv1.Role](t, r)
				if role.Name != rb.RoleRef.Name {
					continue
				}
				if role.Namespace != sa.Namespace || len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"configmaps"}) ||
					!slices.Equal(role.Rules[0].Verbs, []string{"create", "get", "update"}) {
					t.Errorf("the movers' Role %s/%s: %+v, want create, get and update of configmaps in %s", role.Namespace, role.Name, role.Rules, sa.Namespace)
				}
			}
		}
	}
	for _, o := range findAll(objs, "ClusterRoleBinding") {
		for _, s := range into[rbacv1.ClusterRoleBinding](t, o).Subjects {
			if s.Name == sa.Name {
				t.Errorf("the movers' ServiceAccount is bound cluster-wide by %s", o.GetName())
			}
		}
	}
	if bound != 1 {
		t.Errorf("the movers' ServiceAccount has %d RoleBindings, want 1", bound)
	}
}
