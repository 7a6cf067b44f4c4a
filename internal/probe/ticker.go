//go:build benchbaseline

package probe

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// GlobalTicker is the simple design the Scheduler replaces: every interval it lists
// every object and enqueues all of them at once. It exists only as the benchmark's
// baseline (--probe-strategy=global-ticker of a manager built with the benchbaseline
// tag), so the two are measured by the same harness.
type GlobalTicker struct {
	Clock    clock.WithTicker
	Interval time.Duration
	// List returns the objects to enqueue on each tick.
	List func(ctx context.Context) ([]client.Object, error)

	events chan event.TypedGenericEvent[client.Object]
}

// NewGlobalTicker returns a ticker with its event channel ready for Source.
func NewGlobalTicker(clk clock.WithTicker, interval time.Duration, list func(context.Context) ([]client.Object, error)) *GlobalTicker {
	return &GlobalTicker{Clock: clk, Interval: interval, List: list, events: make(chan event.TypedGenericEvent[client.Object], DefaultBufferSize)}
}

// Source feeds the ticks to a controller.
func (t *GlobalTicker) Source() source.Source {
	return source.Channel(t.events, &handler.TypedEnqueueRequestForObject[client.Object]{})
}

// Schedule does nothing: the ticker wakes every object on every tick.
func (t *GlobalTicker) Schedule(types.NamespacedName, string, time.Time) {}

// Forget does nothing: the next tick's list no longer has a deleted object.
func (t *GlobalTicker) Forget(types.NamespacedName) {}

// Lookup says every object is due, on every wake-up: the ticker holds no due times,
// and the design it stands for probes on every reconcile.
func (t *GlobalTicker) Lookup(types.NamespacedName) (time.Time, bool, bool) {
	return t.Clock.Now(), true, true
}

// NeedLeaderElection: like the Scheduler, only the leader ticks.
func (t *GlobalTicker) NeedLeaderElection() bool { return true }

// Start enqueues every object on every tick until ctx ends.
func (t *GlobalTicker) Start(ctx context.Context) error {
	ticker := t.Clock.NewTicker(t.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			objs, err := t.List(ctx)
			if err != nil {
				continue
			}
			for _, o := range objs {
				ref := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName()}}
				select {
				case t.events <- event.TypedGenericEvent[client.Object]{Object: ref}:
				case <-ctx.Done():
					return nil
				}
			}
		}
	}
}
