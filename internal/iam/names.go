package iam

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// userNamePattern is IAM's user name syntax.
var userNamePattern = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)

// ValidUserName reports whether name is a valid IAM user name.
func ValidUserName(name string) bool { return userNamePattern.MatchString(name) }

// uidPattern is the form of a Kubernetes UID (a UUID, as the API server makes them).
// Only names whose uid part has this form are ever claimed as this cluster's: it is
// what keeps cluster "a" from reading the users of cluster "a-b" as its own.
var uidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// hashPattern is the 40-hex part of a hashed user name.
var hashPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// UserName derives the IAM user of one access object from the operator
// installation's cluster id and the object's uid: unique per object, the same on
// every reconcile, and proof of ownership by name alone (Path and tags are not kept
// by every server). The plain form is bk-<cluster id>-<uid>. Where that would be
// invalid or longer than IAM's 64 characters (as with the default cluster id, itself
// a UID), the name is bk-<cluster tag>-<40 hex of a hash of cluster id and uid>: the
// tag (ClusterTag) still says which cluster the user is of, so a user whose access is
// gone is recognisably this cluster's without knowing the uid it was made for.
func UserName(clusterID, uid string) string {
	if name := plainUserName(clusterID, uid); ValidUserName(name) {
		return name
	}
	return "bk-" + ClusterTag(clusterID) + "-" + userHash(clusterID, uid)
}

// LegacyUserName is the hashed name earlier versions gave an access whose plain
// name did not fit: bk-<40 hex>, which names no cluster. It is "" where the plain
// name fits (then both versions agree). Such a user is this cluster's only if it
// hashes from this cluster's id and the uid of one of its accesses.
func LegacyUserName(clusterID, uid string) string {
	if ValidUserName(plainUserName(clusterID, uid)) {
		return ""
	}
	return "bk-" + userHash(clusterID, uid)
}

// ClusterTag is 16 hex characters (64 bits) of a hash of the cluster id, the
// cluster's mark in hashed user names.
func ClusterTag(clusterID string) string {
	sum := sha256.Sum256([]byte("bucketkeeper.io/cluster\x00" + clusterID))
	return hex.EncodeToString(sum[:8])
}

// OwnedUserName reports whether name is of the form this cluster gives its users
// (UserName of a Kubernetes UID): bk-<cluster id>-<uid> or bk-<cluster tag>-<40 hex>.
// Another cluster's names never are (given distinct cluster ids), nor are names
// anyone else chose, nor the legacy bk-<40 hex> form.
func OwnedUserName(clusterID, name string) bool {
	if !ValidUserName(name) {
		return false
	}
	if rest, ok := strings.CutPrefix(name, "bk-"+clusterID+"-"); ok && uidPattern.MatchString(rest) {
		return true
	}
	rest, ok := strings.CutPrefix(name, "bk-"+ClusterTag(clusterID)+"-")
	return ok && hashPattern.MatchString(rest)
}

func plainUserName(clusterID, uid string) string { return "bk-" + clusterID + "-" + uid }

func userHash(clusterID, uid string) string {
	sum := sha256.Sum256([]byte(clusterID + "/" + uid))
	return hex.EncodeToString(sum[:])[:40]
}
