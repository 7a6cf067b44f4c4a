package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// requestCounter counts API requests by the apiserver's own verb and resource names,
// so that the harness's requests can be subtracted from the apiserver's totals.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]float64
}

func newRequestCounter() *requestCounter { return &requestCounter{counts: map[string]float64{}} }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.counts[verbResource(req)]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) snapshot() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]float64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// verbResource names a request as apiserver_request_total does: "PATCH storagebuckets/status".
func verbResource(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	switch {
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	default:
		return req.Method + " discovery"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	resource, item, sub := "", false, ""
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) > 1 {
		item = true
	}
	if len(parts) > 2 {
		sub = "/" + parts[2]
	}
	verb := req.Method
	switch {
	case req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true":
		verb = "WATCH"
	case req.Method == http.MethodGet && !item:
		verb = "LIST"
	}
	return verb + " " + resource + sub
}

// apiserverRequests scrapes apiserver_request_total, keyed like verbResource.
func (e *env) apiserverRequests() (map[string]float64, error) {
	raw, err := e.rawGet("/metrics")
	if err != nil {
		return nil, err
	}
	fams, err := parseMetrics(strings.NewReader(raw))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	fam := fams["apiserver_request_total"]
	if fam == nil {
		return nil, fmt.Errorf("apiserver_request_total missing")
	}
	for _, m := range fam.Metric {
		l := map[string]string{}
		for _, p := range m.Label {
			l[p.GetName()] = p.GetValue()
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out, nil
}

func (e *env) rawGet(path string) (string, error) {
	hc, err := rest.HTTPClientFor(e.cfg)
	if err != nil {
		return "", err
	}
	resp, err := hc.Get(strings.TrimSuffix(e.cfg.Host, "/") + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String(), nil
}

// operatorRequests is the apiserver's count minus the harness's own, over a window.
type apiWindow struct{ server, harness map[string]float64 }

func (e *env) apiStart() apiWindow {
	s, _ := e.apiserverRequests()
	return apiWindow{server: s, harness: e.harness.snapshot()}
}

func (e *env) apiSince(w apiWindow) (map[string]float64, float64) {
	s, _ := e.apiserverRequests()
	out := diff(s, w.server)
	for k, v := range diff(e.harness.snapshot(), w.harness) {
		out[k] -= v
		if out[k] <= 0 {
			delete(out, k)
		}
	}
	// Requests of the control plane itself (leases, its own controllers) are not ours.
	total := 0.0
	for k, v := range out {
		if strings.Contains(k, "storagebuckets") || strings.Contains(k, "objectstores") || strings.Contains(k, "secrets") || strings.Contains(k, "events") || strings.Contains(k, "namespaces") {
			total += v
		} else {
			delete(out, k)
		}
	}
	return out, total
}

// newNamespace creates a namespace for one scenario's StorageBuckets.
func (e *env) newNamespace(name string) error {
	return e.k8s.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// createBuckets creates n StorageBuckets at once (concurrently), labelled for one
// manager's --watch-label-selector.
func (e *env) createBuckets(ns, label string, n int, interval time.Duration) error {
	return e.createRange(ns, label, storeName, 0, n, interval)
}

// createRange creates StorageBuckets b-<from> .. b-<to-1> on store.
func (e *env) createRange(ns, label, store string, from, to int, interval time.Duration) error {
	return inParallel(from, to, func(i int) error {
		sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("b-%05d", i), Labels: map[string]string{"bench": label}},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: store},
				Tags:  map[string]string{"bench": label},
				Probe: bkv1.ProbeSpec{Interval: &metav1.Duration{Duration: interval}}}}
		return e.k8s.Create(e.ctx, sb)
	})
}

// inParallel calls do for every i in [from, to) on `concurrency` workers, and returns
// one of the errors, if any (every call is made either way).
func inParallel(from, to int, do func(i int) error) error {
	work := make(chan int)
	errs := make(chan error, concurrency)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := do(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// conditionTrueForGeneration says whether sb has typ=True for its current generation.
func conditionTrueForGeneration(sb *bkv1.StorageBucket, typ string) bool {
	return apimeta.IsStatusConditionTrue(sb.Status.Conditions, typ) && sb.Status.ObservedGeneration == sb.Generation
}

// countTrue counts the StorageBuckets of ns with typ=True for their generation, in one
// list (for a figure at the end of a scenario, not for waiting: see waitAll).
func (e *env) countTrue(ns, typ string) (int, error) {
	list := &bkv1.StorageBucketList{}
	if err := e.k8s.List(e.ctx, list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if conditionTrueForGeneration(&list.Items[i], typ) {
			n++
		}
	}
	return n, nil
}

// waitAll waits until n StorageBuckets of ns have typ=True for their generation. It
// lists once and then follows a watch: listing thousands of objects every 250 ms would
// cost the API server, on the same two cores as the manager, more than the manager's
// own work, and slow down what is being measured (the floor is timed by its own loop).
func (e *env) waitAll(ns, typ string, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	isTrue := func(sb *bkv1.StorageBucket) bool { return conditionTrueForGeneration(sb, typ) }
	var lastErr error
	for ctx.Err() == nil {
		list := &bkv1.StorageBucketList{}
		if lastErr = e.k8s.List(ctx, list, client.InNamespace(ns)); lastErr != nil {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		ready, count := map[string]bool{}, 0
		set := func(name string, ok bool) {
			if ready[name] != ok {
				if ok {
					count++
				} else {
					count--
				}
			}
			ready[name] = ok
		}
		for i := range list.Items {
			set(list.Items[i].Name, isTrue(&list.Items[i]))
		}
		if count >= n {
			return nil
		}
		w, err := e.watcher.Watch(ctx, &bkv1.StorageBucketList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if lastErr = err; err != nil {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			sb, ok := ev.Object.(*bkv1.StorageBucket)
			if !ok {
				break // an error event (e.g. too old a resourceVersion): list again
			}
			set(sb.Name, ev.Type != watch.Deleted && isTrue(sb))
			if count >= n {
				w.Stop()
				return nil
			}
		}
		w.Stop()
	}
	return fmt.Errorf("timed out after %s waiting for %d StorageBuckets %s (last error: %v)", timeout, n, typ, lastErr)
}

// deleteNamespaceBuckets removes a scenario's StorageBuckets (Retain: buckets stay)
// while its manager still runs, so finalizers are released.
func (e *env) deleteBuckets(ns string) error {
	if err := e.k8s.DeleteAllOf(e.ctx, &bkv1.StorageBucket{}, client.InNamespace(ns)); err != nil {
		return err
	}
	return waitFor(e.ctx, 10*time.Minute, "StorageBuckets of "+ns+" to go", func() (bool, error) {
		list := &bkv1.StorageBucketList{}
		err := e.k8s.List(e.ctx, list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 0, err
	})
}

// beyondFloor is, per verb and resource, how many more requests per bucket ours made
// than the floor (negative: fewer). The floor's discovery requests are its client's
// start-up, not per-bucket work.
func beyondFloor(ours, floor map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range ours {
		out[k] += v
	}
	for k, v := range floor {
		if k != "GET discovery" {
			out[k] -= v
		}
	}
	for k, v := range out {
		if per := v / float64(n); math.Abs(per) < 0.005 {
			delete(out, k)
		} else {
			out[k] = math.Round(per*100) / 100
		}
	}
	return out
}

func describeBeyond(m map[string]float64) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %+.2f", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func describePerBucket(m map[string]float64, n int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]/float64(n)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// eventReasons counts the Events recorded in a namespace by reason (the recorder sends
// them asynchronously: counted once their number stops changing).
func (e *env) eventReasons(ns string) (map[string]float64, error) {
	count := func() (map[string]float64, float64, error) {
		list := &eventsv1.EventList{}
		if err := e.k8s.List(e.ctx, list, client.InNamespace(ns)); err != nil {
			return nil, 0, err
		}
		out, total := map[string]float64{}, 0.0
		for _, ev := range list.Items {
			n := 1.0
			if ev.Series != nil {
				n = float64(ev.Series.Count)
			}
			out[ev.Reason] += n
			total += n
		}
		return out, total, nil
	}
	last, stable := -1.0, 0
	var out map[string]float64
	err := waitFor(e.ctx, time.Minute, "Events of "+ns+" to settle", func() (bool, error) {
		got, total, err := count()
		if err != nil {
			return false, err
		}
		if total == last {
			stable++
		} else {
			stable = 0
		}
		out, last = got, total
		return stable >= 8, nil // unchanged for two seconds
	})
	return out, err
}
