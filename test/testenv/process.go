package testenv

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// stopGrace is how long a stopped peer may take to exit after SIGTERM before it
// is killed: long enough for a clean shutdown, short enough for outage tests.
const stopGrace = 5 * time.Second

// crashReports is where an exit nobody asked for is reported: stderr, which go
// test prints even for a test binary that passed.
var crashReports io.Writer = os.Stderr

// Process is one process a test (or the benchmark) started: a peer, or the operator's
// own binary. Tests stop every one of them by PID, also when they fail.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // Wait's result, valid after done
	log  *os.File
	// serving is set by Serving once the process was ready, stopping by Stop,
	// Kill and Abort. An exit of a serving process nobody stopped is a crash,
	// reported on stderr at once with the log's tail: a peer that dies mid-suite
	// otherwise shows only as "connection refused" in later tests. (A start that
	// fails is reported by the start's error; a tool is meant to exit.)
	serving, stopping atomic.Bool
}

// StartProcess starts bin with its output appended to logPath (env nil: this process's
// environment). The child runs in its own process group (so Stop can signal everything
// it spawned) and gets SIGKILL when the test binary dies, whatever killed it.
func StartProcess(bin string, args, env []string, dir, logPath string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "\n=== %s: %s %q\n", time.Now().Format(time.RFC3339), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pdeathsig fires when the forking *thread* exits, not the process. Forking
	// from a locked thread that is then unlocked keeps it a normal runtime thread,
	// which Go never retires, so the signal means "the test binary died".
	runtime.LockOSThread()
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		logf.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), log: logf}
	reports := crashReports
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		if p.serving.Load() && !p.stopping.Load() {
			fmt.Fprintf(reports, "testenv: %s (PID %d) exited without being stopped (%v)\n--- tail of %s ---\n%s\n",
				filepath.Base(bin), p.PID(), p.err, logPath, localpeers.LogTail(logPath))
		}
		close(p.done)
	}()
	return p, nil
}

// Serving marks the process ready: from now on an exit nobody asked for is
// reported as a crash.
func (p *Process) Serving() { p.serving.Store(true) }

// PID is the process's ID (and its process group's).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended and been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed once the process has ended and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit (exec.Cmd.Wait's result) once Done is closed, nil before.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Kill sends SIGKILL to the process alone (a crash, for failover tests) and waits
// until it is reaped.
func (p *Process) Kill() {
	p.stopping.Store(true)
	_ = syscall.Kill(p.PID(), syscall.SIGKILL)
	<-p.done
}

// Abort sends SIGKILL to the process group at once and waits until the process is
// reaped: for a process whose state is thrown away anyway.
func (p *Process) Abort() {
	p.stopping.Store(true)
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM to the process group, then SIGKILL after stopGrace, and waits
// until the process is reaped. Calling it again is harmless.
func (p *Process) Stop() error {
	p.stopping.Store(true)
	pgid := p.PID()
	if !p.Exited() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
		}
	}
	// Kill the group even after the leader exited: a straggling child would keep
	// ports and files open.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("testenv: process %d did not exit after SIGKILL", pgid)
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago. All
// listeners are held until every port is picked so the kernel cannot hand the
// same port out twice; another process can still take one before the peer binds
// it, which callers handle by retrying with fresh ports.
//
// The ports come from below the kernel's ephemeral range (ip_local_port_range),
// which outgoing connections draw their source ports from. A server that is
// stopped and started again on its ports (an outage test) would otherwise find one
// of them taken by any client connection opened meanwhile, and with several test
// processes running side by side there are many.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	low, high := quietPortRange()
	for attempts := 0; len(ports) < n; attempts++ {
		addr := "127.0.0.1:0"
		if high > low && attempts < 50*n {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(low+rand.IntN(high-low)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // taken: try another
			}
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// quietPortRange is [low, high): the ports from 10000 up to the start of the
// ephemeral range, or an empty range when that leaves too few (then the kernel
// picks, from the ephemeral range).
func quietPortRange() (low, high int) {
	const floor, enough = 10000, 2000
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var ephemeralLow, ephemeralHigh int
	if _, err := fmt.Sscan(string(b), &ephemeralLow, &ephemeralHigh); err != nil || ephemeralLow-floor < enough {
		return 0, 0
	}
	return floor, ephemeralLow
}

// errBindConflict marks a start that failed because a chosen port was taken.
var errBindConflict = errors.New("testenv: port already in use")

// FreeAddr returns a loopback "host:port" whose port was free a moment ago, for a
// server a test or the benchmark is about to start.
func FreeAddr() (string, error) {
	addrs, err := FreeAddrs(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// FreeAddrs returns n loopback "host:port"s on distinct ports that were free a moment
// ago: one process's several servers must not be handed the same port, as two
// separate FreeAddr calls may do.
func FreeAddrs(n int) ([]string, error) {
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(ports))
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}
