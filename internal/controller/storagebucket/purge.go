package storagebucket

import (
	"fmt"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/memo"
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
	records memo.Map[types.UID, purgeProgress]
}

// pass adds one pass's work and returns the totals.
func (m *purgeMemo) pass(uid types.UID, deleted, aborted int) purgeProgress {
	return m.records.Update(uid, func(p purgeProgress, _ bool) (purgeProgress, bool) {
		p.deleted += deleted
		p.aborted += aborted
		p.passes++
		return p, true
	})
}

// reportDue says whether progress may be reported now: on the first pass, then at most
// once per purgeReportInterval. It records the report when it says yes.
func (m *purgeMemo) reportDue(uid types.UID, now time.Time) bool {
	due := false
	m.records.Update(uid, func(p purgeProgress, ok bool) (purgeProgress, bool) {
		if ok && (p.lastReport.IsZero() || now.Sub(p.lastReport) >= purgeReportInterval) {
			p.lastReport, due = now, true
		}
		return p, ok
	})
	return due
}

// pace records until when the purge's next pass waits for its store's purge budget.
func (m *purgeMemo) pace(uid types.UID, until time.Time) {
	m.records.Update(uid, func(p purgeProgress, ok bool) (purgeProgress, bool) {
		p.paced = until
		return p, ok
	})
}

// nextPassIn is how long the purge's next pass waits for its store's purge budget.
func (m *purgeMemo) nextPassIn(uid types.UID, now time.Time) time.Duration {
	p, _ := m.records.Get(uid)
	return max(0, p.paced.Sub(now))
}

func (m *purgeMemo) forget(uid types.UID) { m.records.Delete(uid) }
