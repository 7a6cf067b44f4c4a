package iam

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestUserNames: both forms fit IAM, derive the same name every time, and are
// claimed by their own cluster only.
func TestUserNames(t *testing.T) {
	const uid = "0b6a2f43-9d1e-4c55-8f0a-3e2d1c4b5a69"
	const longID = "5f1c7d9e-2a3b-4c4d-9e8f-0a1b2c3d4e5f" // a kube-system UID: too long for the plain form
	tests := []struct {
		name      string
		clusterID string
		want      string // prefix of UserName
		legacy    bool
	}{
		{"short id: plain", "prod", "bk-prod-" + uid, false},
		{"default id: tagged hash", longID, "bk-" + ClusterTag(longID) + "-", true},
		{"id with a slash: tagged hash", "eu/prod", "bk-" + ClusterTag("eu/prod") + "-", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := UserName(tc.clusterID, uid)
			if !ValidUserName(got) || !strings.HasPrefix(got, tc.want) || got != UserName(tc.clusterID, uid) {
				t.Fatalf("UserName = %q, want a valid, stable name starting %q", got, tc.want)
			}
			if !OwnedUserName(tc.clusterID, got) {
				t.Errorf("%q is not recognised as cluster %q's", got, tc.clusterID)
			}
			legacy := LegacyUserName(tc.clusterID, uid)
			if (legacy != "") != tc.legacy || (legacy != "" && (len(legacy) != 43 || OwnedUserName(tc.clusterID, legacy))) {
				t.Errorf("LegacyUserName = %q: want a bk-<40 hex> name only for hashed clusters, never claimed by form", legacy)
			}
		})
	}
}

// TestOwnedUserName is the table of what a cluster claims: its own names only.
func TestOwnedUserName(t *testing.T) {
	const uid = "0b6a2f43-9d1e-4c55-8f0a-3e2d1c4b5a69"
	const longID = "5f1c7d9e-2a3b-4c4d-9e8f-0a1b2c3d4e5f"
	tagged := UserName(longID, uid)
	tests := []struct {
		clusterID, name string
		owned           bool
	}{
		{"a", "bk-a-" + uid, true},
		{"a", "bk-a-b-" + uid, false},                // cluster "a-b"'s user
		{"a-b", "bk-a-" + uid, false},                // cluster "a"'s user
		{"a", "bk-a-" + strings.ToUpper(uid), false}, // not a UID the API server makes
		{"a", "bk-a-" + uid[:35], false},             // truncated
		{"a", "bk-a-app", false},                     // someone's hand-made user
		{"a", "alice", false},                        // not ours at all
		{"a", "bk-" + userHash("a", uid), false},     // legacy form: names no cluster
		{longID, tagged, true},                       // our hashed form
		{"other-" + longID[6:], tagged, false},       // another cluster's hashed form
		{longID, "bk-" + ClusterTag(longID) + "-" + strings.Repeat("g", 40), false}, // not hex
		{longID, "bk-" + ClusterTag(longID) + "-" + uid, false},                     // tag with a uid: no form of ours
		{longID, tagged + "0", false},
	}
	for _, tc := range tests {
		if got := OwnedUserName(tc.clusterID, tc.name); got != tc.owned {
			t.Errorf("OwnedUserName(%q, %q) = %v, want %v", tc.clusterID, tc.name, got, tc.owned)
		}
	}
}

// TestUserNamesFitAWS creates, on moto (the AWS stand-in, which holds IAM's 64-character
// limit), the longest plain name a cluster id can give and a hashed name of the default
// cluster id, each with its policy and a key; one character more is refused as
// invalid, so the limit the names are cut to is the one AWS applies.
func TestUserNamesFitAWS(t *testing.T) {
	srv := testenv.NewS3(t, testenv.Moto)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := New(ctx, Config{Endpoint: srv.IAMEndpoint, Region: srv.IAMRegion, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey})
	if err != nil {
		t.Fatal(err)
	}
	const uid = "0b6a2f43-9d1e-4c55-8f0a-3e2d1c4b5a69"
	longest := strings.Repeat("c", 64-len("bk--")-len(uid)) // bk-<id>-<uid> at exactly 64
	names := map[string]string{
		"plain, 64 characters": UserName(longest, uid),
		"tagged hash":          UserName("5f1c7d9e-2a3b-4c4d-9e8f-0a1b2c3d4e5f", uid),
	}
	if got := names["plain, 64 characters"]; len(got) != 64 || got != "bk-"+longest+"-"+uid {
		t.Fatalf("the longest plain name is %q (%d characters), want bk-<id>-<uid> at 64", got, len(got))
	}
	for what, name := range names {
		if err := d.EnsureUser(ctx, name); err != nil {
			t.Fatalf("%s %q: %v", what, name, err)
		}
		if err := d.PutPolicy(ctx, name, []Grant{{Bucket: "bk-names", Mode: ReadWrite}}); err != nil {
			t.Fatalf("%s %q: policy: %v", what, name, err)
		}
		if _, err := d.CreateKey(ctx, name); err != nil {
			t.Fatalf("%s %q: key: %v", what, name, err)
		}
	}
	if got := UserName(longest+"c", uid); len(got) > 64 {
		t.Fatalf("a cluster id one character longer gives %q (%d characters)", got, len(got))
	}
	if err := d.EnsureUser(ctx, "bk-"+longest+"c-"+uid); KindOf(err) != KindInvalid {
		t.Fatalf("a 65-character user name: %v (%s), want refused as invalid", err, KindOf(err))
	}
}
