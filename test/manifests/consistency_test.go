package manifests

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderings returns config/default and the chart with default values, by name.
func renderings(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	return map[string][]*unstructured.Unstructured{
		"kustomize": renderKustomize(t),
		"helm":      renderChart(t, nil).Objects,
	}
}

// rbacView reduces every Role, ClusterRole and binding to comparable strings: rules
// are expanded to one line per (group, resource, name, URL, verb) and sorted, so
// that the same permissions written in a different grouping or order compare equal.
// The manager's ServiceAccount, named differently by each rendering, is written as
// "<manager>" in binding subjects.
func rbacView(t *testing.T, objs []*unstructured.Unstructured) map[string][]string {
	t.Helper()
	d, _ := manager(t, objs)
	var sa *unstructured.Unstructured
	for _, o := range findAll(objs, "ServiceAccount") {
		if o.GetName() == d.Spec.Template.Spec.ServiceAccountName {
			sa = o
		}
	}
	if sa == nil {
		t.Fatalf("no ServiceAccount %q for the manager", d.Spec.Template.Spec.ServiceAccountName)
	}
	bindingLines := func(ref rbacv1.RoleRef, subjects []rbacv1.Subject) []string {
		lines := []string{fmt.Sprintf("roleRef %s/%s/%s", ref.APIGroup, ref.Kind, ref.Name)}
		for _, s := range subjects {
			name := s.Name
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa.GetName() && s.Namespace == sa.GetNamespace() {
				name = "<manager>"
			}
			lines = append(lines, fmt.Sprintf("subject %s %s/%s", s.Kind, s.Namespace, name))
		}
		sort.Strings(lines)
		return lines
	}
	view := map[string][]string{}
	for _, o := range objs {
		key := o.GetKind() + "/" + o.GetName()
		switch o.GetKind() {
		case "ClusterRole":
			view[key] = expandRules(into[rbacv1.ClusterRole](t, o).Rules)
		case "Role":
			view[key] = expandRules(into[rbacv1.Role](t, o).Rules)
		case "ClusterRoleBinding":
			b := into[rbacv1.ClusterRoleBinding](t, o)
			view[key] = bindingLines(b.RoleRef, b.Subjects)
		case "RoleBinding":
			b := into[rbacv1.RoleBinding](t, o)
			view[key] = bindingLines(b.RoleRef, b.Subjects)
		}
	}
	return view
}

func expandRules(rules []rbacv1.PolicyRule) []string {
	set := map[string]bool{}
	or := func(s []string) []string {
		if len(s) == 0 {
			return []string{"-"}
		}
		return s
	}
	for _, r := range rules {
		for _, g := range or(r.APIGroups) {
			for _, res := range or(r.Resources) {
				for _, n := range or(r.ResourceNames) {
					for _, u := range or(r.NonResourceURLs) {
						for _, v := range r.Verbs {
							set[fmt.Sprintf("group=%q resource=%s name=%s url=%s verb=%s", g, res, n, u, v)] = true
						}
					}
				}
			}
		}
	}
	return sortedKeys(set)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestRBACAgrees: both renderings grant the same permissions to the same subjects, and
// the chart's manager ClusterRole holds exactly the generated config/rbac/role.yaml.
func TestRBACAgrees(t *testing.T) {
	r := renderings(t)
	kust, helm := rbacView(t, r["kustomize"]), rbacView(t, r["helm"])
	for _, key := range sortedKeys(kust) {
		if !reflect.DeepEqual(kust[key], helm[key]) {
			t.Errorf("%s differs:\nkustomize:\n  %s\nhelm:\n  %s", key,
				strings.Join(kust[key], "\n  "), strings.Join(helm[key], "\n  "))
		}
	}
	for _, key := range sortedKeys(helm) {
		if _, ok := kust[key]; !ok {
			t.Errorf("%s is in the chart but not in config/default", key)
		}
	}

	generated := decodeAll(t, "config/rbac/role.yaml", readFile(t, "config/rbac/role.yaml"))
	want := expandRules(into[rbacv1.ClusterRole](t, find(t, generated, "ClusterRole")).Rules)
	if got := helm["ClusterRole/bucketkeeper-manager"]; !reflect.DeepEqual(got, want) {
		t.Errorf("the chart's manager ClusterRole drifted from config/rbac/role.yaml (make manifests):\nchart:\n  %s\ngenerated:\n  %s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	wantRole := expandRules(into[rbacv1.Role](t, find(t, generated, "Role")).Rules)
	if got := helm["Role/bucketkeeper-manager"]; !reflect.DeepEqual(got, wantRole) {
		t.Errorf("the chart's manager Role (health-check Leases) drifted from config/rbac/role.yaml (make manifests):\nchart:\n  %s\ngenerated:\n  %s",
			strings.Join(got, "\n  "), strings.Join(wantRole, "\n  "))
	}
	// What the metrics filter and leader election need, spelled out.
	mustHave := map[string][]string{
		"ClusterRole/bucketkeeper-metrics-auth": {
			`group="authentication.k8s.io" resource=tokenreviews name=- url=- verb=create`,
			`group="authorization.k8s.io" resource=subjectaccessreviews name=- url=- verb=create`,
		},
		"ClusterRole/bucketkeeper-metrics-reader": {`group="-" resource=- name=- url=/metrics verb=get`},
		"Role/bucketkeeper-leader-election": {
			`group="coordination.k8s.io" resource=leases name=- url=- verb=update`,
			`group="" resource=events name=- url=- verb=create`,
		},
	}
	for key, lines := range mustHave {
		for _, l := range lines {
			if !contains(kust[key], l) {
				t.Errorf("%s lacks %s", key, l)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// manager returns the Deployment and its manager container.
func manager(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := into[appsv1.Deployment](t, find(t, objs, "Deployment"))
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return d, c
		}
	}
	t.Fatalf("Deployment %s has no container named manager", d.Name)
	return nil, corev1.Container{}
}

// parseArgs turns --name=value args into a map; a repeated flag fails the test.
func parseArgs(t *testing.T, args []string) map[string]string {
	t.Helper()
	flags := map[string]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Errorf("arg %q is not of the form --name=value", a)
			continue
		}
		if _, dup := flags[name]; dup {
			t.Errorf("flag --%s is given twice", name)
		}
		flags[name] = value
	}
	return flags
}

// TestManagerArgsAgree: the chart's default flags are exactly config/default's.
func TestManagerArgsAgree(t *testing.T) {
	r := renderings(t)
	_, kc := manager(t, r["kustomize"])
	_, hc := manager(t, r["helm"])
	kust, helm := parseArgs(t, kc.Args), parseArgs(t, hc.Args)
	if !reflect.DeepEqual(kust, helm) {
		t.Errorf("manager flags differ:\nkustomize: %v\nhelm:      %v", kust, helm)
	}
	if len(kc.Command) != 0 || len(hc.Command) != 0 {
		t.Errorf("command must be left to the image's entrypoint (Dockerfile and ko differ): %v / %v", kc.Command, hc.Command)
	}
	ports := func(c corev1.Container) map[string]int32 {
		m := map[string]int32{}
		for _, p := range c.Ports {
			m[p.Name] = p.ContainerPort
		}
		return m
	}
	if !reflect.DeepEqual(ports(kc), ports(hc)) {
		t.Errorf("container ports differ: kustomize %v, helm %v", ports(kc), ports(hc))
	}
}

// TestPodSettingsAgree: replicas, security contexts, resources, probes, the token
// mount and the PodDisruptionBudget are the same in both renderings.
func TestPodSettingsAgree(t *testing.T) {
	r := renderings(t)
	kd, kc := manager(t, r["kustomize"])
	hd, hc := manager(t, r["helm"])
	same := func(what string, a, b any) {
		if !equality.Semantic.DeepEqual(a, b) {
			t.Errorf("%s differs:\nkustomize: %+v\nhelm:      %+v", what, a, b)
		}
	}
	same("replicas", kd.Spec.Replicas, hd.Spec.Replicas)
	same("pod securityContext", kd.Spec.Template.Spec.SecurityContext, hd.Spec.Template.Spec.SecurityContext)
	same("automountServiceAccountToken", kd.Spec.Template.Spec.AutomountServiceAccountToken, hd.Spec.Template.Spec.AutomountServiceAccountToken)
	same("container securityContext", kc.SecurityContext, hc.SecurityContext)
	same("resources", kc.Resources, hc.Resources)
	same("env (Go runtime tuning)", kc.Env, hc.Env)
	same("livenessProbe", kc.LivenessProbe, hc.LivenessProbe)
	same("readinessProbe", kc.ReadinessProbe, hc.ReadinessProbe)
	same("imagePullPolicy", kc.ImagePullPolicy, hc.ImagePullPolicy)
	spread := func(d *appsv1.Deployment) []string {
		var out []string
		for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
			out = append(out, fmt.Sprintf("%d %s %s", c.MaxSkew, c.TopologyKey, c.WhenUnsatisfiable))
		}
		return out
	}
	same("topologySpreadConstraints", spread(kd), spread(hd))
	kp := into[policyv1.PodDisruptionBudget](t, find(t, r["kustomize"], "PodDisruptionBudget"))
	hp := into[policyv1.PodDisruptionBudget](t, find(t, r["helm"], "PodDisruptionBudget"))
	same("PodDisruptionBudget minAvailable", kp.Spec.MinAvailable, hp.Spec.MinAvailable)
	same("PodDisruptionBudget maxUnavailable", kp.Spec.MaxUnavailable, hp.Spec.MaxUnavailable)
}
