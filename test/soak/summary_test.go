package soak_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bucketkeeper/bucketkeeper/test/invariants"
)

// summary is what a soak did and found: printed at its end, and written as soak.json and
// soak.md by make soak.
type summary struct {
	Date     string   `json:"date"`
	Form     string   `json:"form"`
	Duration string   `json:"duration"`
	Seeds    []uint64 `json:"seeds"`
	Stores   []string `json:"stores"`
	Rounds   int      `json:"rounds"`
	// Operations counts the operations run, by kind; Raced those that met an object
	// deleted or made meanwhile (counted, not failed); Skipped those that found nothing
	// to act on; Failed those that failed otherwise (a store down, say).
	Operations map[string]int `json:"operations"`
	Raced      map[string]int `json:"raced"`
	Skipped    map[string]int `json:"skipped"`
	Failed     map[string]int `json:"failed"`
	// Kills of an operator replica (SIGKILL), LeaderKills those of the leader.
	Kills       int `json:"kills"`
	LeaderKills int `json:"leaderKills"`
	// Outages by kind: refused, blackhole, late (proxy), stopped (the store's process).
	Outages map[string]int `json:"outages"`
	// LateLanded counts the creations (buckets, IAM users, keys, policies) late stores
	// carried out after the operator had given up on them.
	LateLanded int `json:"lateLanded"`
	// UnplannedExits: replicas that exited without being killed (a lease lost under
	// load ends a manager by design); they were restarted.
	UnplannedExits int      `json:"unplannedExits"`
	Panics         []string `json:"panics,omitempty"`
	// SettleMedian and SettleMax: how long rounds took to come to rest and check clean.
	SettleMedian string `json:"settleMedian"`
	SettleMax    string `json:"settleMax"`
	// Violations is the number of distinct findings (target 0), Findings each of them
	// with the seed and round it was first seen in.
	Violations            int            `json:"violations"`
	ViolationsByInvariant map[string]int `json:"violationsByInvariant"`
	Findings              []finding      `json:"findings"`
	Invalid               []string       `json:"invalid,omitempty"`

	settles []time.Duration
}

type finding struct {
	Seed      uint64 `json:"seed"`
	Round     int    `json:"round"`
	Invariant string `json:"invariant"`
	Object    string `json:"object"`
	Found     string `json:"found"`
}

// stats is the summary being gathered, shared by a soak's seeds and timers.
type stats struct {
	mu    sync.Mutex
	s     summary
	known map[string]bool // findings already recorded: a leak stays, and is reported once
}

func newStats(cfg soakConfig, rg *rig) *stats {
	st := &stats{known: map[string]bool{}, s: summary{
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Form: cfg.form, Seeds: cfg.seeds,
		Operations: map[string]int{}, Raced: map[string]int{}, Skipped: map[string]int{}, Failed: map[string]int{},
		Outages: map[string]int{}, ViolationsByInvariant: map[string]int{},
	}}
	for _, sr := range rg.stores {
		st.s.Stores = append(st.s.Stores, string(sr.srv.Kind))
	}
	return st
}

func (st *stats) count(f func(*summary)) {
	st.mu.Lock()
	defer st.mu.Unlock()
	f(&st.s)
}

// chaos is how many kills and outages there were so far.
func (st *stats) chaos() (kills, outages int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.s.Kills, total(st.s.Outages)
}

func key(v invariants.Violation) string { return string(v.Invariant) + "|" + v.Object }

// fresh drops the violations already recorded.
func (st *stats) fresh(vs []invariants.Violation) []invariants.Violation {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []invariants.Violation
	for _, v := range vs {
		if !st.known[key(v)] {
			out = append(out, v)
		}
	}
	return out
}

// record adds a round's settle time and new findings.
func (st *stats) record(seed uint64, round int, settle time.Duration, found []invariants.Violation) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.settles = append(st.s.settles, settle)
	for _, v := range found {
		if st.known[key(v)] {
			continue
		}
		st.known[key(v)] = true
		st.s.Findings = append(st.s.Findings, finding{Seed: seed, Round: round, Invariant: string(v.Invariant), Object: v.Object, Found: v.Found})
		st.s.ViolationsByInvariant[string(v.Invariant)]++
		st.s.Violations++
	}
}

// finish completes the summary.
func (st *stats) finish(took time.Duration) summary {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	s.Duration = took.Round(time.Second).String()
	if n := len(s.settles); n > 0 {
		sorted := slices.Clone(s.settles)
		slices.Sort(sorted)
		s.SettleMedian = sorted[n/2].Round(time.Second).String()
		s.SettleMax = sorted[n-1].Round(time.Second).String()
	}
	return s
}

func (s summary) write(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "soak.md"), []byte(s.markdown()), 0o644)
}

func (s summary) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Soak\n\nGenerated by `make soak` (`go test ./test/soak -run TestSoak`) on %s: the %s form, %s, seed(s) %v, on %s.\n\n",
		s.Date, s.Form, s.Duration, s.Seeds, strings.Join(s.Stores, ", "))
	fmt.Fprintf(&b, "| figure | value | target |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| rounds (each settled, then checked) | %d |  |\n", s.Rounds)
	fmt.Fprintf(&b, "| operations run | %d (%s) |  |\n", total(s.Operations), counts(s.Operations))
	fmt.Fprintf(&b, "| operations that raced an object made or deleted meanwhile | %d (%s) |  |\n", total(s.Raced), counts(s.Raced))
	fmt.Fprintf(&b, "| operations that failed (a store down, say) | %d (%s) |  |\n", total(s.Failed), counts(s.Failed))
	fmt.Fprintf(&b, "| operator SIGKILLs survived (of the leader) | %d (%d) |  |\n", s.Kills, s.LeaderKills)
	fmt.Fprintf(&b, "| store outages survived | %d (%s) |  |\n", total(s.Outages), counts(s.Outages))
	fmt.Fprintf(&b, "| creations a late store carried out after the operator gave up | %d |  |\n", s.LateLanded)
	fmt.Fprintf(&b, "| replicas that exited on their own (restarted) | %d |  |\n", s.UnplannedExits)
	fmt.Fprintf(&b, "| operator panics | %d | 0 |\n", len(s.Panics))
	fmt.Fprintf(&b, "| settle time median / max | %s / %s | ≤ %s |\n", s.SettleMedian, s.SettleMax, settleTimeout)
	fmt.Fprintf(&b, "| invariant violations found | %d (%s) | 0 |\n", s.Violations, counts(s.ViolationsByInvariant))
	if len(s.Findings) > 0 {
		fmt.Fprintf(&b, "\n## Findings\n\n| seed | round | invariant | object | found |\n|---|---|---|---|---|\n")
		for _, f := range s.Findings {
			fmt.Fprintf(&b, "| %d | %d | %s | %s | %s |\n", f.Seed, f.Round, f.Invariant, f.Object, strings.ReplaceAll(f.Found, "|", `\|`))
		}
	}
	return b.String()
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
