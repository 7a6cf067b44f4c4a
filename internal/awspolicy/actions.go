package awspolicy

// Placeholders of the rendered policy, which users replace with their own values.
const (
	// BucketNamePrefix stands for the ObjectStore's spec.bucketNamePrefix: every
	// bucket the operator makes is named <prefix>-...
	BucketNamePrefix = "<BUCKET_NAME_PREFIX>"
	// AccountID stands for the AWS account of the operator's identity.
	AccountID = "<ACCOUNT_ID>"
)

// Condition says when an operation needs an action: always, or only for a request
// that names a version, carries tags, a lock, or asks to bypass a governance
// retention (AWS authorizes such a request by more actions, or by others).
type Condition uint8

// Conditions of a request.
const (
	// Always: every request of the operation.
	Always Condition = iota
	// Unversioned: a request on an object that names no version (the current one).
	Unversioned
	// Versioned: a request that names a version of an object.
	Versioned
	// Tagged: a write that carries the object's tags (x-amz-tagging).
	Tagged
	// Retention: a write that carries a retention (x-amz-object-lock-mode and date).
	Retention
	// LegalHold: a write that carries a legal hold (x-amz-object-lock-legal-hold).
	LegalHold
	// BypassGovernance: a request that asks to bypass a governance retention.
	BypassGovernance
	// ObjectLock: a CreateBucket with object lock enabled.
	ObjectLock
)

var conditionNames = [...]string{"always", "without a version", "of a version", "with tags", "with a retention",
	"with a legal hold", "bypassing governance retention", "with object lock"}

func (c Condition) String() string {
	if int(c) < len(conditionNames) {
		return conditionNames[c]
	}
	return "unknown condition"
}

// Use is an operation (the AWS SDK's name of it) that needs an action, when it
// meets the condition.
type Use struct {
	Operation string
	When      Condition
}

// Action is one IAM action and the operations that need it.
type Action struct {
	// Name is the action as a policy names it: "s3:GetObject", "iam:CreateRole".
	Name string
	Uses []Use
}

// Statement is one statement of the policy: the actions it allows on its resource.
type Statement struct {
	Sid string
	// Resource is an ARN pattern with the placeholders, or "*".
	Resource string
	Actions  []Action
}

// Resources of the statements.
const (
	anything     = "*"
	itsBuckets   = "arn:aws:s3:::" + BucketNamePrefix + "-*"
	itsObjects   = itsBuckets + "/*"
	itsUsers     = "arn:aws:iam::" + AccountID + ":user/bk-*"
	itsRoles     = "arn:aws:iam::" + AccountID + ":role/bk-*"
	oidcProvider = "arn:aws:iam::" + AccountID + ":oidc-provider/*"
)

// Statements is every action the operator and the mover need on AWS, in the order
// the policy lists them. IAM users and roles are named bk-* (internal/iam's
// UserName, which also names the roles of keyless access); the OpenID Connect
// provider is named after the cluster's token issuer, which the operator does not
// choose. The list actions of IAM take no resource but "*".
var Statements = []Statement{
	{Sid: "HealthCheck", Resource: anything, Actions: []Action{
		action("s3:ListAllMyBuckets", on("ListBuckets")),
	}},
	{Sid: "ManageItsBuckets", Resource: itsBuckets, Actions: []Action{
		action("s3:CreateBucket", on("CreateBucket")),
		action("s3:DeleteBucket", on("DeleteBucket")),
		action("s3:GetBucketAcl", on("GetBucketAcl")),
		action("s3:ListBucket", on("HeadBucket", "ListObjectsV2")),
		action("s3:ListBucketVersions", on("ListObjectVersions")),
		action("s3:ListBucketMultipartUploads", on("ListMultipartUploads")),
		action("s3:GetBucketTagging", on("GetBucketTagging")),
		action("s3:PutBucketTagging", on("PutBucketTagging", "DeleteBucketTagging")),
		action("s3:GetBucketVersioning", on("GetBucketVersioning")),
		// A bucket created with object lock is versioned and locked by the one call.
		action("s3:PutBucketVersioning", on("PutBucketVersioning"), when(ObjectLock, "CreateBucket")),
		action("s3:GetLifecycleConfiguration", on("GetBucketLifecycleConfiguration")),
		action("s3:PutLifecycleConfiguration", on("PutBucketLifecycleConfiguration", "DeleteBucketLifecycle")),
		action("s3:GetBucketPublicAccessBlock", on("GetPublicAccessBlock")),
		action("s3:PutBucketPublicAccessBlock", on("PutPublicAccessBlock", "DeletePublicAccessBlock")),
		action("s3:GetBucketCORS", on("GetBucketCors")),
		action("s3:PutBucketCORS", on("PutBucketCors", "DeleteBucketCors")),
		action("s3:GetBucketPolicy", on("GetBucketPolicy")),
		action("s3:PutBucketPolicy", on("PutBucketPolicy")),
		action("s3:DeleteBucketPolicy", on("DeleteBucketPolicy")),
		action("s3:GetBucketObjectLockConfiguration", on("GetObjectLockConfiguration")),
		action("s3:PutBucketObjectLockConfiguration", on("PutObjectLockConfiguration"), when(ObjectLock, "CreateBucket")),
	}},
	// The probe's canary object, and the purge of a bucket's versions and uploads.
	{Sid: "ProbeAndPurgeItsObjects", Resource: itsObjects, Actions: []Action{
		action("s3:PutObject", on("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")),
		action("s3:GetObject", when(Unversioned, "GetObject", "HeadObject")),
		action("s3:DeleteObject", when(Unversioned, "DeleteObject", "DeleteObjects")),
		action("s3:DeleteObjectVersion", when(Versioned, "DeleteObject", "DeleteObjects")),
		action("s3:AbortMultipartUpload", on("AbortMultipartUpload")),
		action("s3:GetObjectRetention", on("GetObjectRetention")),
		action("s3:GetObjectLegalHold", on("GetObjectLegalHold")),
		action("s3:BypassGovernanceRetention", when(BypassGovernance, "DeleteObject", "DeleteObjects", "PutObjectRetention")),
	}},
	// What moving a bucket adds, into or out of AWS: each version read with its tags
	// and lock, written with them, and a lock set in place where the source's changed.
	{Sid: "MoveItsObjects", Resource: itsObjects, Actions: []Action{
		action("s3:GetObjectVersion", when(Versioned, "GetObject", "HeadObject")),
		action("s3:GetObjectTagging", when(Unversioned, "GetObjectTagging")),
		action("s3:GetObjectVersionTagging", when(Versioned, "GetObjectTagging")),
		action("s3:PutObjectTagging", when(Tagged, "PutObject", "CreateMultipartUpload")),
		action("s3:ListMultipartUploadParts", on("ListParts")),
		action("s3:PutObjectRetention", on("PutObjectRetention"), when(Retention, "PutObject", "CreateMultipartUpload")),
		action("s3:PutObjectLegalHold", on("PutObjectLegalHold"), when(LegalHold, "PutObject", "CreateMultipartUpload")),
	}},
	{Sid: "ManageBucketkeeperUsers", Resource: itsUsers, Actions: []Action{
		action("iam:CreateUser", on("CreateUser")),
		action("iam:DeleteUser", on("DeleteUser")),
		action("iam:PutUserPolicy", on("PutUserPolicy")),
		action("iam:DeleteUserPolicy", on("DeleteUserPolicy")),
		action("iam:CreateAccessKey", on("CreateAccessKey")),
		action("iam:DeleteAccessKey", on("DeleteAccessKey")),
		action("iam:ListAccessKeys", on("ListAccessKeys")),
	}},
	// Keyless access: a role per BucketAccess for a ServiceAccount.
	{Sid: "ManageBucketkeeperRoles", Resource: itsRoles, Actions: []Action{
		action("iam:CreateRole", on("CreateRole")),
		action("iam:GetRole", on("GetRole")),
		action("iam:UpdateAssumeRolePolicy", on("UpdateAssumeRolePolicy")),
		action("iam:UpdateRole", on("UpdateRole")),
		action("iam:PutRolePolicy", on("PutRolePolicy")),
		action("iam:DeleteRolePolicy", on("DeleteRolePolicy")),
		action("iam:DeleteRole", on("DeleteRole")),
	}},
	// Keyless access: the cluster's ServiceAccount token issuer, registered once.
	{Sid: "TrustTheClusterIssuer", Resource: oidcProvider, Actions: []Action{
		action("iam:CreateOpenIDConnectProvider", on("CreateOpenIDConnectProvider")),
		action("iam:GetOpenIDConnectProvider", on("GetOpenIDConnectProvider")),
		action("iam:UpdateOpenIDConnectProviderThumbprint", on("UpdateOpenIDConnectProviderThumbprint")),
		action("iam:AddClientIDToOpenIDConnectProvider", on("AddClientIDToOpenIDConnectProvider")),
	}},
	// The health check of the IAM endpoint, and the collectors of identities whose
	// access is gone.
	{Sid: "HealthCheckAndCollector", Resource: anything, Actions: []Action{
		action("iam:ListUsers", on("ListUsers")),
		action("iam:ListRoles", on("ListRoles")),
		action("iam:ListOpenIDConnectProviders", on("ListOpenIDConnectProviders")),
	}},
}

func action(name string, uses ...[]Use) Action {
	a := Action{Name: name}
	for _, u := range uses {
		a.Uses = append(a.Uses, u...)
	}
	return a
}

// on: every request of the operations needs the action.
func on(operations ...string) []Use { return when(Always, operations...) }

// when: the requests of the operations that meet c need the action.
func when(c Condition, operations ...string) []Use {
	uses := make([]Use, 0, len(operations))
	for _, op := range operations {
		uses = append(uses, Use{Operation: op, When: c})
	}
	return uses
}
