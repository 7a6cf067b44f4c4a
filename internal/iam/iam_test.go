package iam

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestPolicyDocumentObjectLock: a key of a locked bucket may read what locks its
// objects and never change it: whatever the grants, no document carries an action of
// NeverGranted (s3:PutObjectRetention among them), nor a wildcard.
func TestPolicyDocumentObjectLock(t *testing.T) {
	statements := func(grants ...Grant) map[string]statement {
		t.Helper()
		doc, err := PolicyDocument(grants)
		if err != nil {
			t.Fatal(err)
		}
		var parsed policyDocument
		if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
			t.Fatal(err)
		}
		out := map[string]statement{}
		for _, st := range parsed.Statement {
			out[st.Sid] = st
			for _, a := range st.Action {
				if slices.Contains(NeverGranted, a) || strings.ContainsAny(a, "*?") {
					t.Errorf("grants %+v: statement %s allows %s", grants, st.Sid, a)
				}
			}
		}
		return out
	}
	plain := statements(Grant{Bucket: "b", Mode: ReadWrite})
	if _, ok := plain["ObjectLockRead"]; ok || len(plain) != 2 {
		t.Errorf("a bucket without object lock: %+v", plain)
	}
	locked := statements(Grant{Bucket: "b", Mode: ReadWrite, ObjectLock: true}, Grant{Bucket: "r", Mode: ReadOnly, ObjectLock: true})
	if st := locked["ObjectLockRead"]; !slices.Equal(st.Action, lockReadActions) || !slices.Equal(st.Resource, []string{"arn:aws:s3:::b/*", "arn:aws:s3:::r/*"}) {
		t.Errorf("ObjectLockRead: %+v", st)
	}
	if len(locked) != 5 {
		t.Errorf("locked buckets: %d statements %+v, want the two per mode and ObjectLockRead", len(locked), locked)
	}
	if !slices.Contains(NeverGranted, "s3:PutObjectRetention") {
		t.Error("s3:PutObjectRetention is not among NeverGranted: no store bounds it to lengthening a retention")
	}
}
