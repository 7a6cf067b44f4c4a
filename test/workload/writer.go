package workload

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// retryBackoff is how long the writer waits before retrying a refused request, as an
// application's retry loop does.
const retryBackoff = 100 * time.Millisecond

// Writer is an application writing to a bucket through credentials it reads again
// after every failure, as one mounting its Secret as a volume does: it puts,
// overwrites and deletes Keys keys in turn and retries each request until the store
// acknowledges it. Only an acknowledged request is logged.
type Writer struct {
	bucket  string
	connect func(context.Context) s3.Client
	// every is the least time from one request's start to the next one's (0: none).
	every time.Duration
	// stopping ends the writer between requests: one cut short could have been carried
	// out without being acknowledged, which would read as lost.
	stopping atomic.Bool
	done     chan struct{}

	mu  sync.Mutex
	log AckLog
}

// AckLog is what the store acknowledged: each key's last content ("" after a delete),
// when each request was acknowledged, and the counts.
type AckLog struct {
	Last                   map[string]string
	At                     []time.Time
	Puts, Deletes, Retries int
}

// Keys is how many keys (live/00, live/01, ...) the writer cycles through: a pass of a
// move finds at most that many changed.
const Keys = 40

// Start runs a writer on bucket until Stop or ctx ends. connect reads the credentials
// (the Secret) and returns a client, or nil while they cannot be read.
func Start(ctx context.Context, bucket string, connect func(context.Context) s3.Client) *Writer {
	return StartEvery(ctx, bucket, 0, connect)
}

// StartEvery is Start for a writer that starts a request at most once every every:
// an application of a steady pace. In a bucket that keeps every version (object
// lock), each write is a version a move copies, however few the keys: a writer faster
// than the move copies keeps the move catching up.
func StartEvery(ctx context.Context, bucket string, every time.Duration, connect func(context.Context) s3.Client) *Writer {
	w := &Writer{bucket: bucket, connect: connect, every: every, done: make(chan struct{}), log: AckLog{Last: map[string]string{}}}
	go w.run(ctx)
	return w
}

func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	c := w.connect(ctx)
	var next time.Time
	for i := 0; !w.stopping.Load(); i++ {
		name := fmt.Sprintf("live/%02d", i%Keys)
		content := fmt.Sprintf("%s@%d", name, i)
		del := i%5 == 4
		if w.every > 0 && i > 0 {
			select { // the pace of the application, not a wait for the store
			case <-ctx.Done():
			case <-time.After(time.Until(next)):
			}
		}
		next = time.Now().Add(w.every)
		for ctx.Err() == nil {
			err := fmt.Errorf("no credentials")
			if c != nil {
				if del {
					err = c.DeleteObject(ctx, w.bucket, name)
				} else {
					err = c.PutObject(ctx, w.bucket, name, []byte(content))
				}
			}
			if err == nil {
				w.ack(name, content, del)
				break
			}
			w.mu.Lock()
			w.log.Retries++
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(retryBackoff):
			}
			if next := w.connect(ctx); next != nil {
				c = next
			}
		}
	}
}

func (w *Writer) ack(name, content string, del bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if del {
		w.log.Last[name] = ""
		w.log.Deletes++
	} else {
		w.log.Last[name] = content
		w.log.Puts++
	}
	w.log.At = append(w.log.At, time.Now())
}

// AcksSince counts the requests acknowledged after since.
func (w *Writer) AcksSince(since time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.log.At {
		if at.After(since) {
			n++
		}
	}
	return n
}

// Stop ends the writer between two requests and returns what was acknowledged. It
// may be called again.
func (w *Writer) Stop() AckLog {
	w.stopping.Store(true)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.log
	l.Last = maps.Clone(w.log.Last)
	l.At = slices.Clone(w.log.At)
	return l
}

// LostOn lists the keys whose last acknowledged state is not what bucket holds, read
// with c.
func (l AckLog) LostOn(ctx context.Context, c s3.Client, bucket string) []string {
	var lost []string
	for _, name := range slices.Sorted(maps.Keys(l.Last)) {
		want := l.Last[name]
		body, err := c.GetObject(ctx, bucket, name, 1<<20)
		switch {
		case want == "" && s3.KindOf(err) == s3.KindNotFound:
		case want != "" && err == nil && string(body) == want:
		default:
			lost = append(lost, fmt.Sprintf("%s (want %q, got %q, %v)", name, want, body, err))
		}
	}
	return lost
}
