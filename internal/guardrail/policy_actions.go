package guardrail

import (
	"strings"
)

// AllowedActions are the only actions a tenant's policy may name, in an Allow or a
// Deny: the data plane of its own bucket. Everything that configures the bucket (tags, which carry
// the ownership bucketkeeper relies on; the policy itself; lifecycle, versioning, ACLs,
// CORS, public access, object lock, replication, deletion of the bucket) is the
// operator's to set from the spec, and a principal the tenant names must not be able to
// change it behind the operator's back. Left out on purpose as well:
//   - object ACLs (s3:PutObjectAcl, s3:GetObjectAcl): an ACL can make an object public
//     where the policy guardrail cannot see it;
//   - object lock (s3:PutObjectRetention, s3:PutObjectLegalHold,
//     s3:BypassGovernanceRetention, s3:PutBucketObjectLockConfiguration): a bypass,
//     a lifted legal hold or a changed lock configuration would weaken the lock the
//     spec asks for, and a retention a named principal sets could lock data in a mode
//     and for a time the store's guardrails.objectLock never allowed;
//   - s3:RestoreObject: it moves archived data between storage classes at the store
//     owner's cost, a decision for the platform team.
//
// Object tags are included: they are the object's own data (PutObject with tags needs
// s3:PutObjectTagging), not the bucket's ownership tags.
//
// Wildcards are refused altogether ("s3:Get*" also matches s3:GetBucketPolicy, and a
// store may add actions a pattern would match later), and so is NotAction (every action
// but the listed ones). That holds for a Deny too: a Deny takes access away from
// everyone it names, and where the store applies bucket policies to the operator's own
// credentials (SeaweedFS, Ceph RGW) a Deny of s3:PutBucketPublicAccessBlock or
// s3:DeleteBucketPolicy would keep the operator from withdrawing a public policy when
// the platform team forbids public buckets, and one of s3:GetBucketTagging or
// s3:DeleteBucket from probing, configuring or deleting the bucket at all. A tenant
// still denies what it wants of the data plane (plain HTTP, requests from outside a
// network) by listing the data actions. The operator's own data calls under such a
// Deny are its health probe, which then fails as the tenant asked, and a purge, which
// removes the operator's policy first (see the storagebucket controller's purge).
var AllowedActions = []string{
	// Objects: read, write, delete, their tags and attributes.
	"s3:GetObject",
	"s3:GetObjectVersion",
	"s3:GetObjectAttributes",
	"s3:GetObjectVersionAttributes",
	"s3:PutObject",
	"s3:DeleteObject",
	"s3:DeleteObjectVersion",
	"s3:GetObjectTagging",
	"s3:GetObjectVersionTagging",
	"s3:PutObjectTagging",
	"s3:PutObjectVersionTagging",
	"s3:DeleteObjectTagging",
	"s3:DeleteObjectVersionTagging",
	// Multipart uploads.
	"s3:AbortMultipartUpload",
	"s3:ListMultipartUploadParts",
	// Listing the bucket.
	"s3:ListBucket",
	"s3:ListBucketVersions",
	"s3:ListBucketMultipartUploads",
	"s3:GetBucketLocation",
}

// allowedActionSet holds AllowedActions in lower case: AWS compares action names
// case-insensitively, so "S3:getobject" is s3:GetObject (and is sent as written).
var allowedActionSet = func() map[string]bool {
	set := make(map[string]bool, len(AllowedActions))
	for _, a := range AllowedActions {
		set[strings.ToLower(a)] = true
	}
	return set
}()

// checkActions refuses a statement that names more than AllowedActions.
func checkActions(name string, st *statement) error {
	verb, kind := "allows", "an Allow"
	if st.effect != "Allow" {
		verb, kind = "denies", "a Deny"
	}
	if st.notAction != nil {
		return refuse("policy %s is %s with NotAction, which names every action it does not list, the bucket's configuration included; list the actions it %s in Action (allowed: %s)",
			name, kind, verb, strings.Join(AllowedActions, ", "))
	}
	for _, a := range st.action.list {
		if strings.ContainsAny(a, "*?") {
			return refuse("policy %s %s the wildcard action %s; a statement must list its actions (allowed: %s)",
				name, verb, quote(a), strings.Join(AllowedActions, ", "))
		}
		if !allowedActionSet[strings.ToLower(a)] {
			return refuse("policy %s %s the action %s, which configures the bucket or is not an S3 data action; a statement may name only %s",
				name, verb, quote(a), strings.Join(AllowedActions, ", "))
		}
	}
	return nil
}
