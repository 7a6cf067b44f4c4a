package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// table prints one row per StorageBucket change to out, the way `kubectl get sb -w`
// would, and tells when every sample is ready: the bucket Ready and Available, and,
// for a sample that asks for access, its key in its Secret. It is fed by informer
// event handlers: rows are written from one goroutine in event order, and only when
// something shown (or any condition) changed, so a heartbeat that rewrites nothing
// prints nothing.
type table struct {
	out     io.Writer
	samples map[types.NamespacedName]bool // value: ready in this run
	access  map[types.NamespacedName]bool // samples with spec.access; value: key issued
	token   string                        // this run's probe request
	ready   chan struct{}                 // closed once every sample is ready
	onReady func()
	onKey   func(*bkv1.BucketAccess) // once per sample, when its key is in its Secret

	mu      sync.Mutex
	closed  bool                            // ready is closed
	last    map[types.NamespacedName]string // signature of the last printed row
	widths  []int
	started bool
}

var columns = []string{"NAMESPACE", "NAME", "BUCKET", "READY", "AVAILABLE", "LAST-PROBE", "MESSAGE"}

// newTable watches samples; those in withAccess are ready only once their implicit
// BucketAccess (same name) has written a key to its Secret.
func newTable(out io.Writer, samples, withAccess []types.NamespacedName, token string, onReady func(), onKey func(*bkv1.BucketAccess)) *table {
	t := &table{
		out: out, token: token, onReady: onReady, onKey: onKey,
		samples: map[types.NamespacedName]bool{},
		access:  map[types.NamespacedName]bool{},
		ready:   make(chan struct{}),
		last:    map[types.NamespacedName]string{},
		// Wide enough for the samples' usual values, so rows line up without
		// knowing them in advance; a longer value widens its column from then on.
		widths: []int{10, 10, 34, 6, 10, 11},
	}
	for _, k := range samples {
		t.samples[k] = false
	}
	for _, k := range withAccess {
		t.access[k] = false
	}
	return t
}

// Ready is closed once every sample is Ready and Available in this run.
func (t *table) Ready() <-chan struct{} { return t.ready }

// handler is the informer event handler that drives the table.
func (t *table) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.update(obj) },
		UpdateFunc: func(_, obj any) { t.update(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if sb, ok := obj.(*bkv1.StorageBucket); ok {
				t.mu.Lock()
				defer t.mu.Unlock()
				key := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
				delete(t.last, key)
				t.printRow([]string{sb.Namespace, sb.Name, sb.Status.BucketName, "-", "-", "-", "deleted"})
			}
		},
	}
}

func (t *table) update(obj any) {
	sb, ok := obj.(*bkv1.StorageBucket)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	row := []string{sb.Namespace, sb.Name, orDash(sb.Status.BucketName),
		condStatus(sb, bkv1.ConditionReady), condStatus(sb, bkv1.ConditionAvailable),
		probeTime(sb.Status.LastProbeTime), message(sb)}
	sig := strings.Join(row, "\x00") + conditionsSignature(sb.Status.Conditions)

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last[key] != sig {
		t.last[key] = sig
		t.printRow(row)
	}
	if wasReady, isSample := t.samples[key]; isSample && !wasReady && sampleReady(sb, t.token) {
		t.samples[key] = true
		t.checkReadyLocked()
	}
}

// accessHandler is the BucketAccess informer's event handler: it marks a sample's
// key as issued once its implicit BucketAccess is Ready.
func (t *table) accessHandler() toolscache.ResourceEventHandler {
	update := func(obj any) {
		ba, ok := obj.(*bkv1.BucketAccess)
		if !ok || !accessReady(ba) {
			return
		}
		key := types.NamespacedName{Namespace: ba.Namespace, Name: ba.Name}
		t.mu.Lock()
		defer t.mu.Unlock()
		if issued, wanted := t.access[key]; wanted && !issued {
			t.access[key] = true
			if t.onKey != nil {
				t.onKey(ba)
			}
			t.checkReadyLocked()
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, obj any) { update(obj) },
	}
}

// checkReadyLocked closes ready once every sample and every sample's key is ready;
// t.mu is held.
func (t *table) checkReadyLocked() {
	if t.closed {
		return
	}
	for _, m := range []map[types.NamespacedName]bool{t.samples, t.access} {
		for _, r := range m {
			if !r {
				return
			}
		}
	}
	t.closed = true
	if t.onReady != nil {
		t.onReady()
	}
	close(t.ready)
}

// printRow pads every column but the last to its width; t.mu is held.
func (t *table) printRow(row []string) {
	if !t.started {
		t.started = true
		t.printRow(columns)
	}
	var b strings.Builder
	for i, cell := range row {
		if i == len(row)-1 {
			b.WriteString(cell)
			break
		}
		t.widths[i] = max(t.widths[i], len(cell))
		fmt.Fprintf(&b, "%-*s   ", t.widths[i], cell)
	}
	fmt.Fprintln(t.out, strings.TrimRight(b.String(), " "))
}

// sampleReady is the --exit-when-ready verdict for one sample: Ready=True for its
// current generation, Available=True, and both decided in this run (the run's probe
// request handled), not left in etcd by the previous one.
func sampleReady(sb *bkv1.StorageBucket, token string) bool {
	r := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionReady)
	a := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionAvailable)
	return r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == sb.Generation &&
		a != nil && a.Status == metav1.ConditionTrue &&
		sb.Status.LastHandledProbeRequest == token
}

// accessReady: the BucketAccess is Ready for its current generation, which it is
// only once its key is in its Secret.
func accessReady(ba *bkv1.BucketAccess) bool {
	r := apimeta.FindStatusCondition(ba.Status.Conditions, bkv1.ConditionReady)
	return r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == ba.Generation && ba.Status.AccessKeyID != ""
}

func condStatus(sb *bkv1.StorageBucket, typ string) string {
	if c := apimeta.FindStatusCondition(sb.Status.Conditions, typ); c != nil {
		return string(c.Status)
	}
	return "-"
}

// message says what a person looks at first: why the bucket is not Ready, else why
// it is not Available, else the last probe's verdict.
func message(sb *bkv1.StorageBucket) string {
	r := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionReady)
	a := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionAvailable)
	switch {
	case r == nil:
		return "waiting for the operator"
	case r.Status != metav1.ConditionTrue:
		return r.Reason + ": " + r.Message
	case a != nil && a.Status != metav1.ConditionTrue:
		return a.Reason + ": " + a.Message
	case a != nil:
		return a.Message
	default:
		return r.Message
	}
}

func conditionsSignature(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "\x00%s/%s/%s/%s/%d", c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration)
	}
	return b.String()
}

// probeTime shows the clock time rather than an age: a row is printed once per
// change, and an age would be wrong a second later.
func probeTime(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.TimeOnly)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
