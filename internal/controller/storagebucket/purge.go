package storagebucket

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// purgeReportInterval bounds how often a purge's progress is written to status and
// announced as an Event: a large bucket takes many passes (about one a second), and a
// status write and an Event each would flood the API server and `kubectl describe`.
const purgeReportInterval = 10 * time.Second

// purgeProgress is what one purge has done so far. S3 offers no cheap count of what a
// bucket holds, so what is left is told as "more pages remain" or "none listed".
type purgeProgress struct {
	deleted, aborted, passes int
	lastReport               time.Time
	// paced: the next pass waits for the store's purge budget until then.
	paced time.Time
	// policyLifted: the operator's policy is off the bucket (liftPolicyBeforePurge).
	policyLifted bool
}

func (p purgeProgress) totals() string {
	return fmt.Sprintf("%d object versions deleted and %d incomplete uploads aborted so far, in %d passes", p.deleted, p.aborted, p.passes)
}

func (p purgeProgress) left(more bool) string {
	if more {
		return "objects left: more than one pass lists, purging continues"
	}
	return "objects left: none in the last listing; the bucket is deleted once a listing finds it empty"
}

// purgeMemo keeps each purge's progress by UID in memory. After a restart the counts
// start again from zero, which the passes themselves do not need: each lists afresh.
type purgeMemo struct {
	mu      sync.Mutex
	records map[types.UID]purgeProgress
}

// pass adds one pass's work and returns the totals.
func (m *purgeMemo) pass(uid types.UID, deleted, aborted int) purgeProgress {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == nil {
		m.records = map[types.UID]purgeProgress{}
	}
	p := m.records[uid]
	p.deleted += deleted
	p.aborted += aborted
	p.passes++
	m.records[uid] = p
	return p
}

// reportDue says whether progress may be reported now: on the first pass, then at most
// once per purgeReportInterval. It records the report when it says yes.
func (m *purgeMemo) reportDue(uid types.UID, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.records[uid]
	if !ok || (!p.lastReport.IsZero() && now.Sub(p.lastReport) < purgeReportInterval) {
		return false
	}
	p.lastReport = now
	m.records[uid] = p
	return true
}

// pace records until when the purge's next pass waits for its store's purge budget.
func (m *purgeMemo) pace(uid types.UID, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.records[uid]; ok {
		p.paced = until
		m.records[uid] = p
	}
}

// nextPassIn is how long the purge's next pass waits for its store's purge budget.
func (m *purgeMemo) nextPassIn(uid types.UID, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(0, m.records[uid].paced.Sub(now))
}

// liftPolicy records that the purge took the operator's policy off the bucket.
func (m *purgeMemo) liftPolicy(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == nil {
		m.records = map[types.UID]purgeProgress{}
	}
	p := m.records[uid]
	p.policyLifted = true
	m.records[uid] = p
}

// policyLifted says whether the purge took the operator's policy off the bucket.
func (m *purgeMemo) policyLifted(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records[uid].policyLifted
}

func (m *purgeMemo) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.records, uid)
}
