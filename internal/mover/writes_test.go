package mover_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestWritesDuringTheMoveAreKept writes, overwrites and deletes keys on the source for
// the whole move, keeping a log of every acknowledged request, while copy passes run.
// Then the writer stops, as the cutover stops a source's writes, and a final pass
// runs: every acknowledged write is on the target with its last content, every
// acknowledged delete is absent. Nothing is lost.
func TestWritesDuringTheMoveAreKept(t *testing.T) {
	base := mixedObjects("base", 300, nil)
	src, tgt := newBucket(t, seaweed, false), newBucket(t, rgw, false)
	src.putAll(t, base)
	f := newMove(t, src, tgt, mover.VersionsCurrent)

	w := &writer{src: src, last: map[string]*object{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { w.run(stop) })
	// Copy passes while the writer runs, with writes between them, until one pass
	// has deleted from the target what the writer deleted on the source after the
	// previous pass copied it.
	pass, deleted := 0, int64(0)
	for pass < 2 || (deleted == 0 && pass < 8) {
		pass++
		before := w.count()
		p := f.run(mover.ModeCopy, pass)
		if p.Failures.Count != 0 {
			t.Fatalf("copy pass %d: failures %s", pass, p.Failures)
		}
		deleted += p.Counts.Deleted
		eventually(t, time.Minute, "the writer to write on after the pass", func() error {
			if n := w.count() - before; n < 30 {
				return fmt.Errorf("%d acknowledged requests since the pass began", n)
			}
			return nil
		})
	}
	close(stop)
	wg.Wait()
	p := f.run(mover.ModeFinal, pass+1)
	if deleted += p.Counts.Deleted; deleted == 0 {
		t.Error("no pass deleted anything from the target: the writer's deletes were never carried")
	}
	if !p.Verified {
		t.Fatalf("final pass not verified: differences %s, failures %s", p.Differences, p.Failures)
	}

	want := append([]object(nil), base...)
	deletes := 0
	for _, o := range w.last {
		if o == nil {
			deletes++
			continue
		}
		want = append(want, *o)
	}
	lost := 0
	ctx := context.Background()
	for key, o := range w.last {
		if o != nil {
			if msg := checkObject(ctx, tgt, *o); msg != "" {
				lost++
				t.Errorf("acknowledged write lost: %s", msg)
			}
			continue
		}
		if _, err := tgt.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(tgt.bucket), Key: aws.String(key)}); s3.KindOf(err) != s3.KindNotFound {
			lost++
			t.Errorf("acknowledged delete of %s not on the target (HEAD: %v)", key, err)
		}
	}
	t.Logf("writer: %d acknowledged writes, %d acknowledged deletes over %d keys in %d passes (%d deletions carried); %d lost",
		w.writes, w.deletes, len(w.last), pass+1, deleted, lost)
	expectObjects(t, tgt, want)
}

// writer writes, overwrites and deletes 60 keys of the source in a loop, logging the
// last acknowledged request of each key (nil: deleted). Failed requests are retried
// until acknowledged, so the log is what the store confirmed.
type writer struct {
	src side

	mu              sync.Mutex
	last            map[string]*object
	writes, deletes int
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes + w.deletes
}

func (w *writer) run(stop <-chan struct{}) {
	ctx := context.Background()
	rng := mrand.New(mrand.NewPCG(7, 7))
	gen := map[string]int{}
	for {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("live/k%02d", rng.IntN(60))
		if rng.IntN(10) < 3 {
			for {
				_, err := w.src.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(w.src.bucket), Key: aws.String(key)})
				if err == nil {
					break
				}
			}
			w.mu.Lock()
			w.last[key], w.deletes = nil, w.deletes+1
			w.mu.Unlock()
			continue
		}
		gen[key]++
		o := object{key: key, gen: gen[key], size: rng.Int64N(32 << 10), tags: map[string]string{"gen": fmt.Sprint(gen[key])}}
		if rng.IntN(20) == 0 {
			o.size = 2<<20 + rng.Int64N(1<<20) // streamed by the mover
		}
		for w.src.put(ctx, o) != nil {
		}
		w.mu.Lock()
		w.last[key], w.writes = &o, w.writes+1
		w.mu.Unlock()
	}
}
