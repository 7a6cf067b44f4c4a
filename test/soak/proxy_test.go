package soak_test

import (
	"errors"
	"io"
	"net"
	"sync"
)

// outageMode is how a store is unreachable while an outage lasts.
type outageMode string

const (
	// up: connections pass through.
	up outageMode = "up"
	// refused: every connection is closed at once, as by a host whose port is shut.
	refused outageMode = "refused"
	// blackhole: connections are accepted and never answered, as by a store that hangs;
	// the operator's deadlines must end them.
	blackhole outageMode = "blackhole"
	// late: requests that create something (a bucket, an IAM user, key or policy) are
	// never answered, and are carried out once the operator gave up on them; every
	// other request is answered (late_test.go).
	late outageMode = "late"
)

// tcpProxy forwards a loopback port to a store's port byte for byte, so SigV4 signatures
// (over the Host the client sent) still verify. The operator reaches every store through
// one; the soak's own admin calls and the checker go to the store directly.
type tcpProxy struct {
	Addr   string // 127.0.0.1:PORT
	target string
	ln     net.Listener
	late   *lateStore // what connections go to while the store is late

	mu    sync.Mutex
	mode  outageMode
	conns map[net.Conn]struct{} // open client-side connections
	wg    sync.WaitGroup
}

func newTCPProxy(target string) (*tcpProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	lateStore, err := newLateStore(target)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	p := &tcpProxy{Addr: ln.Addr().String(), target: target, ln: ln, late: lateStore, mode: up, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		mode := p.mode
		if mode != refused {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		switch mode {
		case refused:
			_ = c.Close()
		case blackhole:
			p.wg.Add(1)
			go func() { // read and drop until the outage ends or the client gives up
				defer p.wg.Done()
				_, _ = io.Copy(io.Discard, c)
				p.forget(c)
			}()
		case late:
			p.wg.Add(1)
			go p.pipe(c, p.late.addr)
		default:
			p.wg.Add(1)
			go p.pipe(c, p.target)
		}
	}
}

// pipe forwards c to target until either side ends.
func (p *tcpProxy) pipe(c net.Conn, target string) {
	defer p.wg.Done()
	defer p.forget(c)
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
}

func (p *tcpProxy) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// set switches the mode and drops every open connection, so no request started before
// the switch is answered after it: an outage cuts what is in flight, and its end lets go
// of what it held. (What a late store holds back is carried out all the same.)
func (p *tcpProxy) set(mode outageMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *tcpProxy) Close() error {
	err := p.ln.Close()
	p.set(refused)
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return errors.Join(err, p.late.Close())
}
