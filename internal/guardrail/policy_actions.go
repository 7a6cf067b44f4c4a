package guardrail

import (
	"strings"
)

// AllowedActions are the only actions a tenant's Allow statement may grant: the data
// plane of its own bucket. Everything that configures the bucket (tags, which carry
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
// Wildcards are refused in an Allow altogether ("s3:Get*" also matches
// s3:GetBucketPolicy, and a store may add actions a pattern would match later), and so
// is NotAction (it grants every action but the listed ones). A Deny may name any
// action, wildcards and NotAction included: it only takes access away.
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

// checkAllowActions refuses an Allow statement that grants more than AllowedActions.
func checkAllowActions(name string, st *statement) error {
	if st.notAction != nil {
		return refuse("policy %s is an Allow with NotAction, which grants every action it does not list; list the actions it grants in Action (allowed: %s)",
			name, strings.Join(AllowedActions, ", "))
	}
	for _, a := range st.action.list {
		if strings.ContainsAny(a, "*?") {
			return refuse("policy %s allows the wildcard action %s; an Allow must list its actions (allowed: %s)",
				name, quote(a), strings.Join(AllowedActions, ", "))
		}
		if !allowedActionSet[strings.ToLower(a)] {
			return refuse("policy %s allows the action %s, which configures the bucket or is not an S3 data action; an Allow may grant only %s",
				name, quote(a), strings.Join(AllowedActions, ", "))
		}
	}
	return nil
}
