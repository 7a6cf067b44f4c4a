package guardrail

import (
	"errors"
	"testing"
)

// TestBucketOwnerAdoptable: a bucket naming the operator's account is adoptable, one
// naming another is not, whatever the store admin stated; a bucket naming no owner is
// adoptable only on a store stated to have one account, and then nothing else is read.
func TestBucketOwnerAdoptable(t *testing.T) {
	failed := errors.New("ListBuckets failed")
	cases := []struct {
		name          string
		named         string
		singleAccount bool
		want          string
		wantErr       error
		ok            bool
		asked         bool
	}{
		{"the operator's account", "acct", false, "acct", nil, true, true},
		{"another account", "other", false, "acct", nil, false, true},
		{"another account on a single-account store", "other", true, "acct", nil, false, true},
		{"the operator's account on a single-account store", "acct", true, "acct", nil, true, true},
		{"no owner named", "", false, "acct", nil, false, false},
		{"no owner named on a single-account store", "", true, "acct", nil, true, false},
		{"the operator's account unknown", "acct", false, "", nil, false, true},
		{"the operator's account unreadable", "acct", true, "", failed, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			asked := false
			ok, err := BucketOwnerAdoptable(c.named, c.singleAccount, func() (string, error) {
				asked = true
				return c.want, c.wantErr
			})
			if ok != c.ok || !errors.Is(err, c.wantErr) || asked != c.asked {
				t.Errorf("BucketOwnerAdoptable(%q, %v) = %v, %v (operator's account asked: %v); want %v, %v (%v)",
					c.named, c.singleAccount, ok, err, asked, c.ok, c.wantErr, c.asked)
			}
		})
	}
}
