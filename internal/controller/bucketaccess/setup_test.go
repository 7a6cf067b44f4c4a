package bucketaccess

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// recordingManager keeps the controllers added to it instead of running them.
type recordingManager struct {
	manager.Manager
	added []manager.Runnable
}

func (m *recordingManager) Add(r manager.Runnable) error {
	m.added = append(m.added, r)
	return nil
}

// newRecordingManager builds a manager that never contacts its API server: wiring a
// controller only reads the scheme and registers watches for later.
func newRecordingManager(t *testing.T) *recordingManager {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := bkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &recordingManager{Manager: mgr}
}

// workersOf reads the worker count of the one controller a setup added.
func workersOf(t *testing.T, m *recordingManager) int {
	t.Helper()
	if len(m.added) != 1 {
		t.Fatalf("setup added %d runnables, want one controller", len(m.added))
	}
	v := reflect.Indirect(reflect.ValueOf(m.added[0]))
	f := v.FieldByName("MaxConcurrentReconciles")
	if v.Kind() != reflect.Struct || !f.IsValid() || !f.CanInt() {
		t.Fatalf("%T has no MaxConcurrentReconciles: controller-runtime's controller changed, read its worker count another way", m.added[0])
	}
	return int(f.Int())
}

// TestBucketAccessWorkersFollowConcurrency: the BucketAccess controller runs
// --concurrency workers, as the StorageBucket controller does, not
// controller-runtime's default of one.
func TestBucketAccessWorkersFollowConcurrency(t *testing.T) {
	const concurrency = 6
	access := newRecordingManager(t)
	if err := (&Reconciler{}).SetupWithManager(access, concurrency); err != nil {
		t.Fatal(err)
	}
	if got := workersOf(t, access); got != concurrency {
		t.Fatalf("BucketAccess controller has %d workers, want %d", got, concurrency)
	}
}

// TestBucketUsableChangedPassesARefusal: a StorageBucket that a guardrail refuses while
// it was not Ready yet (created together with its access, say) changes no Ready status,
// yet its accesses must learn it at once: they say BucketRefused, not BucketNotReady.
func TestBucketUsableChangedPassesARefusal(t *testing.T) {
	waiting := &bkv1.StorageBucket{Status: bkv1.StorageBucketStatus{Conditions: []metav1.Condition{
		{Type: bkv1.ConditionReady, Status: metav1.ConditionFalse, Reason: bkv1.ReasonProgressing},
	}}}
	refused := waiting.DeepCopy()
	refused.Status.Conditions = []metav1.Condition{
		{Type: bkv1.ConditionReady, Status: metav1.ConditionFalse, Reason: bkv1.ReasonNamespaceNotAllowed},
		{Type: bkv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: bkv1.ReasonNamespaceNotAllowed},
	}
	p := bucketUsableChanged()
	if !p.Update(event.UpdateEvent{ObjectOld: waiting, ObjectNew: refused}) {
		t.Error("a guardrail's refusal of a bucket that was not Ready does not reach its accesses")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: refused, ObjectNew: waiting}) {
		t.Error("the end of a refusal does not reach the bucket's accesses")
	}
	if p.Update(event.UpdateEvent{ObjectOld: waiting, ObjectNew: waiting.DeepCopy()}) {
		t.Error("an update that changes nothing an access reads is passed on")
	}
}
