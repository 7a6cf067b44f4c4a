package receiver

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Connection and memory limits.
//
// The receiver's port is reachable by more than the holders of its key, so what a
// caller without the key can make it hold is bounded, and not by the number of
// callers:
//
//   - Connections: at most Options.MaxConnections (default 64) are open at once. A
//     connection past the cap is not accepted: it waits in the kernel's accept queue,
//     where nothing of it is read, until an open one closes.
//   - Time: a connection keeps its slot at most readHeaderTimeout (5s) to send a
//     request's headers, readTimeout (15s) to send the whole request, writeTimeout
//     (30s) from the end of the headers to the end of the answer, and idleTimeout (15s)
//     between requests; a 401 or 413 closes it at once (see refuse).
//   - Bodies: a body is read only for a request whose signature headers pass (see
//     serveProbe), at most MaxBodyBytes of it, and only inside one of MaxConnections
//     body slots, held until the answer is written. So at most MaxConnections ×
//     MaxBodyBytes of bodies are in memory at once (4 MiB by default), whichever the
//     protocol: over HTTP/1 a connection carries one request at a time and the slots
//     never wait; over HTTP/2 a connection's streams share them.
//   - HTTP/2 (served with TLS): at most maxStreamsPerConnection requests at once per
//     connection, and flow-control windows of MaxBodyBytes per connection and per
//     stream, so the server buffers at most 64 KiB of not yet read body per connection
//     (the default would be 1 MiB).
//   - Headers: at most maxHeaderBytes (16 KiB) per request.
//
// Once a request has been answered without its body being read, net/http itself
// discards what the client still sends of it (up to 256 KiB, within readTimeout)
// before it closes the connection; discarded bytes are not kept.
const (
	maxStreamsPerConnection = 8

	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 15 * time.Second
	maxHeaderBytes    = 16 << 10
)

// newServer is the receiver's http.Server with the limits above. The body is at most
// 64 KiB, so the timeouts are generous for any caller that means to send one.
func (r *Receiver) newServer() *http.Server {
	return &http.Server{
		Handler:           r.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          maxStreamsPerConnection,
			MaxReceiveBufferPerConnection: MaxBodyBytes,
			MaxReceiveBufferPerStream:     MaxBodyBytes,
		},
	}
}

// bodySlots bounds the request bodies held in memory at once: one slot per body, from
// before it is read until its answer is written.
type bodySlots chan struct{}

// acquire waits for a free slot, or for ctx (the request's) to end.
func (s bodySlots) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// limitedListener accepts at most cap(slots) connections at a time, like
// golang.org/x/net/netutil.LimitListener, and counts them: how many are open and the
// most that ever were (which the tests read). A slot is taken before Accept, so a
// connection past the cap is left in the kernel's accept queue, unread.
type limitedListener struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	open      atomic.Int64
	peak      atomic.Int64
}

func newLimitedListener(l net.Listener, maxConns int) *limitedListener {
	return &limitedListener{Listener: l, slots: make(chan struct{}, maxConns), closed: make(chan struct{})}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	open := l.open.Add(1)
	for {
		peak := l.peak.Load()
		if open <= peak || l.peak.CompareAndSwap(peak, open) {
			break
		}
	}
	return &limitedConn{Conn: c, release: l.release}, nil
}

func (l *limitedListener) release() {
	l.open.Add(-1)
	<-l.slots
}

// Close stops accepting, also an Accept waiting for a slot.
func (l *limitedListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.closed) })
	return err
}

// limitedConn gives its slot back when it is closed, once however often that is.
type limitedConn struct {
	net.Conn
	releaseOnce sync.Once
	release     func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(c.release)
	return err
}

// CloseWrite passes a half-close on: net/http sends its FIN that way before it closes a
// connection whose request body it did not read, so the client sees the answer before
// any reset. A wrapper without it would hide the *net.TCPConn's.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
