package soak_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
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
	// late: every request reaches the store lateDelay after it was sent, after the
	// operator gave up on it (--s3-request-timeout): a CreateBucket the operator took
	// for failed is carried out behind its back, as by an overloaded store.
	late outageMode = "late"
)

// lateDelay is how long a late store holds each connection before passing it on:
// longer than the operator's S3 deadline (10s in the soak).
const lateDelay = 12 * time.Second

// tcpProxy forwards a loopback port to a store's port byte for byte, so SigV4 signatures
// (over the Host the client sent) still verify. The operator reaches every store through
// one; the soak's own admin calls and the checker go to the store directly.
type tcpProxy struct {
	Addr   string // 127.0.0.1:PORT
	target string
	ln     net.Listener

	closed chan struct{}

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
	p := &tcpProxy{Addr: ln.Addr().String(), target: target, ln: ln, mode: up, conns: map[net.Conn]struct{}{}, closed: make(chan struct{})}
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
			go func() {
				select { // the client's bytes wait in the socket meanwhile, even once it has gone
				case <-time.After(lateDelay):
				case <-p.closed:
				}
				p.pipe(c, true) // its Done is this goroutine's
			}()
		default:
			p.wg.Add(1)
			go p.pipe(c, false)
		}
	}
}

// pipe forwards c to the store until either side ends. For a late connection
// (landLate) the client has usually gone by then: the store is given until it answers
// (or answerWait passes) before its connection is closed, since a server that sees its
// client go cancels the request, and the request is to land.
func (p *tcpProxy) pipe(c net.Conn, landLate bool) {
	defer p.wg.Done()
	defer p.forget(c)
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	sent, answered := make(chan struct{}), make(chan struct{})
	go func() { _, _ = io.Copy(s, c); close(sent) }()
	go func() { _, _ = io.Copy(c, s); close(answered) }()
	select {
	case <-answered:
	case <-sent:
		if landLate {
			select {
			case <-answered:
			case <-time.After(answerWait):
			case <-p.closed:
			}
		}
	}
}

// answerWait bounds how long a late request's answer is waited for.
const answerWait = 30 * time.Second

func (p *tcpProxy) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// set switches the mode and drops every open connection, so no request started before
// the switch is answered after it: an outage cuts what is in flight, and its end lets go
// of what it held. What a late store holds is not dropped: it lands, late.
func (p *tcpProxy) set(mode outageMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wasLate := p.mode == late
	p.mode = mode
	if !wasLate {
		p.dropLocked()
	}
}

func (p *tcpProxy) dropLocked() {
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *tcpProxy) Close() error {
	err := p.ln.Close()
	close(p.closed)
	p.mu.Lock()
	p.mode = refused
	p.dropLocked()
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
