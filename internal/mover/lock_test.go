package mover

import (
	"errors"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

func TestCoversHoldsTheTargetToTheSourcesLock(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	gov := func(d time.Duration) s3.ObjectLock {
		return s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: now.Add(d)}
	}
	comp := func(d time.Duration) s3.ObjectLock {
		return s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: now.Add(d)}
	}
	held := s3.ObjectLock{LegalHold: true}
	for _, tc := range []struct {
		name     string
		tgt, src s3.ObjectLock
		want     bool
	}{
		{"nothing on either", s3.ObjectLock{}, s3.ObjectLock{}, true},
		{"the same retention", gov(time.Hour), gov(time.Hour), true},
		{"a longer one on the target (its default)", gov(24 * time.Hour), gov(time.Hour), true},
		{"a shorter one on the target", gov(time.Minute), gov(time.Hour), false},
		{"none on the target", s3.ObjectLock{}, gov(time.Hour), false},
		{"Governance for Compliance", gov(time.Hour), comp(time.Hour), false},
		{"Compliance for Governance", comp(time.Hour), gov(time.Hour), true},
		{"the source's retention ended", s3.ObjectLock{}, gov(-time.Second), true},
		{"a hold the target lacks", gov(time.Hour), held, false},
		{"a hold the source lifted", held, s3.ObjectLock{}, false},
		{"the same hold", held, held, true},
	} {
		if got := covers(tc.tgt, tc.src, now); got != tc.want {
			t.Errorf("%s: covers(%s, %s) = %v, want %v", tc.name, tc.tgt, tc.src, got, tc.want)
		}
	}
}

func TestWriteLockNeverShortensARetention(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	l := writeLock(s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: now.Add(time.Hour + 300*time.Millisecond), LegalHold: true}, now)
	if want := now.Add(time.Hour + time.Second); l.Mode != s3.RetentionCompliance || !l.RetainUntil.Equal(want) || !l.LegalHold {
		t.Errorf("writeLock: %s, want Compliance until %s with the hold", l, want)
	}
	if l := writeLock(s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: now.Add(time.Hour)}, now); !l.RetainUntil.Equal(now.Add(time.Hour)) {
		t.Errorf("a whole second moved: %s", l)
	}
	if l := writeLock(s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: now.Add(-time.Minute), LegalHold: true}, now); l.Mode != "" || !l.LegalHold {
		t.Errorf("an ended retention is written as %s, want the hold alone", l)
	}
}

func TestLockRulesRefuseWhatTheTargetDoesNotAllow(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	rules := &LockRules{AllowedModes: []s3.RetentionMode{s3.RetentionGovernance}, MaxRetentionDays: 30}
	for _, tc := range []struct {
		lock    s3.ObjectLock
		refused bool
	}{
		{s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: now.Add(24 * time.Hour)}, false},
		{s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: now.Add(time.Minute)}, true},
		{s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: now.Add(-time.Minute)}, false}, // ended
		{s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: now.Add(31 * 24 * time.Hour)}, true},
		{s3.ObjectLock{LegalHold: true}, false},
	} {
		err := rules.check("k", tc.lock, now)
		var refused *lockRefused
		if errors.As(err, &refused) != tc.refused {
			t.Errorf("check(%s) = %v, want refused %v", tc.lock, err, tc.refused)
		}
	}
	if err := (*LockRules)(nil).check("k", s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: now.Add(time.Hour)}, now); err != nil {
		t.Errorf("no rules refuse %v", err)
	}
}

func TestStrongerRetentionOnlyLengthens(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, tc := range []struct {
		have, want s3.ObjectLock
		out        *s3.ObjectRetention
	}{
		{s3.ObjectLock{}, s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: at(time.Hour)}, &s3.ObjectRetention{Mode: s3.RetentionGovernance, Until: at(time.Hour)}},
		{s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: at(time.Minute)}, s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: at(time.Hour)},
			&s3.ObjectRetention{Mode: s3.RetentionCompliance, Until: at(time.Hour)}},
		{s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: at(time.Minute)}, s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: at(time.Hour)},
			&s3.ObjectRetention{Mode: s3.RetentionCompliance, Until: at(time.Hour)}},
		{s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: at(2 * time.Hour)}, s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: at(time.Hour)},
			&s3.ObjectRetention{Mode: s3.RetentionCompliance, Until: at(2 * time.Hour)}},
		{s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: at(time.Hour)}, s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: at(time.Hour)}, nil},
		{s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: at(time.Hour)}, s3.ObjectLock{LegalHold: true}, nil},
	} {
		got := strongerRetention(tc.have, tc.want)
		if (got == nil) != (tc.out == nil) || got != nil && (got.Mode != tc.out.Mode || !got.Until.Equal(tc.out.Until)) {
			t.Errorf("strongerRetention(%s, %s) = %+v, want %+v", tc.have, tc.want, got, tc.out)
		}
	}
}

func TestPathKeyProblem(t *testing.T) {
	for key, bad := range map[string]bool{
		"a/../b": true, "a/./b": true, "a//b": true, "a/.": true, "a/..": true, "./a": true, "../a": true, "/a": true, "//a": true,
		".": true, "..": true, "a\\b": true, "a//": true,
		"a/b": false, "a%2Fb": false, "a/..b": false, "dots..": false, ".hidden": false, "a/": false, "a": false, "": false,
	} {
		if got := pathKeyProblem(key) != ""; got != bad {
			t.Errorf("pathKeyProblem(%q) = %q, want a problem: %v", key, pathKeyProblem(key), bad)
		}
	}
}
