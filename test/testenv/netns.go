package testenv

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// inNetNS runs fn on an OS thread that has joined the network namespace ns, so that a
// socket fn opens belongs to ns (a socket keeps its namespace for life, whatever thread
// uses it later). The thread goes back to this process's own namespace before it runs
// any other goroutine; if it cannot, it stays locked and Go retires it with fn's
// goroutine.
func inNetNS(ns *os.File, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		fnErr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(fnErr, err) // the thread stays locked: retired on return
			return
		}
		runtime.UnlockOSThread()
		errc <- fnErr
	}()
	return <-errc
}

// dialInNetNS dials addr from inside the network namespace ns.
func dialInNetNS(ctx context.Context, ns *os.File, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetNS(ns, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// forwarder accepts TCP connections inside a network namespace and joins each to a
// loopback address of this machine's own namespace: it is how Pods on the test node
// reach the API server and the S3 stores, which listen on 127.0.0.1 only.
type forwarder struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// forwardInto listens on listenAddr inside ns and forwards every connection to target.
func forwardInto(ns *os.File, listenAddr, target string) (*forwarder, error) {
	var ln net.Listener
	if err := inNetNS(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", listenAddr)
		return err
	}); err != nil {
		return nil, err
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.pipe(in)
		}()
	}
}

// pipe copies both ways until either side closes; Close ends every pipe at once.
func (f *forwarder) pipe(in net.Conn) {
	out, err := net.Dial("tcp", f.target)
	if err != nil {
		in.Close()
		return
	}
	if !f.track(in, out) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); closeWrite(out); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); closeWrite(in); done <- struct{}{} }()
	<-done
	<-done
	f.untrack(in, out)
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil { // closed meanwhile
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(f.conns, c)
	}
}

// Close stops listening, ends every forwarded connection and waits for the pipes.
func (f *forwarder) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
	return err
}
