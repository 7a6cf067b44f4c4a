package manifests

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

const fieldOwner = client.FieldOwner("bucketkeeper-manifests-test")

// warnings collects the API server's warnings (deprecations, PodSecurity violations
// of a workload's pod template) so that a test can fail on them.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// TestServerSideDryRunApply applies every rendered object to a real kube-apiserver:
// the namespaces and CRDs for real, everything else with server-side apply in dry-run
// mode, so that the API server's validation and admission (PodSecurity "restricted"
// on bucketkeeper-system included) accept each one without a warning.
func TestServerSideDryRunApply(t *testing.T) {
	cp := testenv.NewControlPlane(t)
	cfg := rest.CopyConfig(cp.Config)
	warn := &warnings{}
	cfg.WarningHandlerWithContext = warn
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	kust := renderKustomize(t)
	chart := renderChart(t, nil)
	full := renderChart(t, fullValues())

	// The namespace config/default creates carries the restricted PodSecurity label;
	// apply it for real so that admission checks the pod templates below.
	applyForReal(ctx, t, c, find(t, kust, "Namespace"))
	for _, ns := range []string{"bucketkeeper-leases"} { // fullValues puts the Lease there
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, crd := range append(findAll(kust, "CustomResourceDefinition"), chart.CRDs...) {
		applyForReal(ctx, t, c, crd)
	}
	if w := warn.take(); len(w) > 0 {
		t.Errorf("warnings while installing the namespace and CRDs: %q", w)
	}

	for name, objs := range map[string][]*unstructured.Unstructured{
		"kustomize":        kust,
		"helm-defaults":    chart.Objects,
		"helm-full-values": full.Objects,
	} {
		t.Run(name, func(t *testing.T) {
			n := 0
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace" {
					continue
				}
				n++
				err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
					fieldOwner, client.ForceOwnership, client.DryRunAll)
				if err != nil {
					t.Errorf("dry-run apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
				if w := warn.take(); len(w) > 0 {
					t.Errorf("%s %s/%s: API server warnings: %q", o.GetKind(), o.GetNamespace(), o.GetName(), w)
				}
			}
			if n < 8 {
				t.Errorf("only %d objects applied; the rendering looks incomplete", n)
			}
		})
	}

	// The warning check above has teeth: a privileged pod template in the restricted
	// namespace is reported.
	t.Run("podsecurity-is-enforced", func(t *testing.T) {
		d := find(t, kust, "Deployment").DeepCopy()
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]any)["securityContext"] = map[string]any{"privileged": true}
		if err := unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(d), fieldOwner, client.ForceOwnership, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		w := strings.Join(warn.take(), "\n")
		if !strings.Contains(w, "PodSecurity") {
			t.Errorf("no PodSecurity warning for a privileged pod template (got %q): the check above would miss violations", w)
		}
	})
}

func applyForReal(ctx context.Context, t *testing.T, c client.Client, o *unstructured.Unstructured) {
	t.Helper()
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), fieldOwner, client.ForceOwnership); err != nil {
		t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
	}
}
