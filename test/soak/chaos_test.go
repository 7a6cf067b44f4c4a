package soak_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The chaos: the operator's processes SIGKILLed, stores unreachable. Both are drawn
// like the other operations and end on timers of their own, so they cut into whatever
// the operator is doing; heal ends what is still under way before a round settles.

// killOperator SIGKILLs a replica (the leader, mostly: killing the standby changes
// little) and starts it again after a moment, as a Deployment would.
func (r *soakRun) killOperator() (string, error) {
	target := r.rig.replicas[r.pick(len(r.rig.replicas))]
	if r.chance(0.75) {
		for _, rep := range r.rig.replicas {
			if rep.leads() {
				target = rep
			}
		}
	}
	delay := time.Duration(r.pick(5000)) * time.Millisecond
	if target.exited() {
		return "", errSkipped
	}
	leader := target.leads()
	target.kill()
	if leader {
		r.rig.noteLeaderKill()
	}
	r.stats.count(func(s *summary) {
		s.Kills++
		if leader {
			s.LeaderKills++
		}
	})
	r.after(delay, func() { r.restart(target) })
	return fmt.Sprintf("replica %s (leader %v), back in %s", target.name, leader, delay), nil
}

// restart starts a replica that is not running.
func (r *soakRun) restart(rep *replica) {
	if _, err := rep.ensureRunning(); err != nil {
		r.logf("restarting replica %s: %v", rep.name, err)
	}
}

// storeOutage makes a store unreachable for a few seconds: its proxy refuses every
// connection, or accepts and never answers, or passes requests on only after the
// operator gave up on them, or the server's process itself is stopped (and started
// again, on its ports and data).
func (r *soakRun) storeOutage() (string, error) {
	sr := pickFrom(r, r.rig.stores)
	mode := pickFrom(r, []outageMode{refused, refused, blackhole, blackhole, late, late, "stopped"})
	length := time.Duration(3000+r.pick(17000)) * time.Millisecond
	sr.mu.Lock()
	if sr.down != up || sr.stopped {
		sr.mu.Unlock()
		return "", errSkipped
	}
	sr.outageID++
	id := sr.outageID
	if mode == "stopped" {
		sr.stopped = true
	} else {
		sr.down = mode
	}
	sr.mu.Unlock()
	if mode == "stopped" {
		if err := sr.srv.Stop(); err != nil {
			return "", fmt.Errorf("stopping %s: %w", sr.srv.Kind, err)
		}
	} else {
		for _, p := range sr.proxies {
			p.set(mode)
		}
	}
	r.stats.count(func(s *summary) { s.Outages[string(mode)]++ })
	r.after(length, func() { r.endOutage(sr, id) })
	return fmt.Sprintf("%s %s for %s", sr.name, mode, length), nil
}

// endOutage brings the store back, if outage id is still the one under way.
func (r *soakRun) endOutage(sr *storeRig, id int) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if sr.outageID != id {
		return
	}
	if sr.stopped {
		if err := sr.srv.Start(); err != nil {
			r.logf("starting %s again: %v", sr.srv.Kind, err)
			return // heal tries again
		}
		sr.stopped = false
	}
	if sr.down != up {
		for _, p := range sr.proxies {
			p.set(up)
		}
		sr.down = up
	}
	sr.outageID++
}

// after runs f after d on a goroutine of its own, which heal waits for.
func (r *soakRun) after(d time.Duration, f func()) {
	r.pending.Add(1)
	timer := time.AfterFunc(d, func() {
		defer r.pending.Done()
		f()
	})
	r.mu.Lock()
	r.timers = append(r.timers, pendingTimer{timer: timer, f: f})
	r.mu.Unlock()
}

type pendingTimer struct {
	timer *time.Timer
	f     func()
}

// heal ends every outage and restarts every replica now: the round is over.
func (r *soakRun) heal() {
	r.mu.Lock()
	timers := r.timers
	r.timers = nil
	r.mu.Unlock()
	for _, pt := range timers {
		if pt.timer.Stop() { // not yet fired: run it here
			pt.f()
			r.pending.Done()
		}
	}
	r.pending.Wait()
	for _, sr := range r.rig.stores {
		r.endOutage(sr, sr.currentOutage())
	}
	for _, rep := range r.rig.replicas {
		r.restart(rep)
	}
}

// troubled lists the stores under an outage now, by name.
func (rg *rig) troubled() []string {
	var out []string
	for _, sr := range rg.stores {
		sr.mu.Lock()
		if sr.down != up || sr.stopped {
			out = append(out, sr.name)
		}
		sr.mu.Unlock()
	}
	return out
}

// lateLanded counts the creations late stores carried out after the operator gave up.
func (rg *rig) lateLanded() int {
	n := 0
	for _, sr := range rg.stores {
		for _, p := range sr.proxies {
			n += int(p.late.landed.Load())
		}
	}
	return n
}

func (sr *storeRig) currentOutage() int {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.outageID
}

// watchReplicas restarts a replica that exited without being killed on purpose (a lost
// lease under load ends a controller-runtime manager by design) and records it, with
// the last lines of its log. A panic is recorded as such.
func (r *soakRun) watchReplicas() {
	for _, rep := range r.rig.replicas {
		rep.mu.Lock()
		exited, planned := rep.proc != nil && rep.proc.Exited(), rep.planned
		rep.mu.Unlock()
		if !exited || planned {
			continue
		}
		tail := testenv.Tail(rep.currentLog(), 1500)
		panicked := strings.Contains(tail, "panic:")
		r.stats.count(func(s *summary) {
			s.UnplannedExits++
			if panicked {
				s.Panics = append(s.Panics, fmt.Sprintf("replica %s: %s", rep.name, tail))
			}
		})
		r.logf("replica %s exited on its own; restarting it. Its log ends:\n%s", rep.name, tail)
		r.restart(rep)
	}
}
