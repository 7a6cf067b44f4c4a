// Package iam gives each application its own credentials through the standard
// AWS IAM API, which AWS, Versity S3 Gateway (its standalone IAM service) and
// SeaweedFS all serve. One IAM user per access object, one inline policy listing
// its buckets, and at most two access keys (two only while a rotation is under
// way).
//
// Why IAM users and not bucket policies naming keys: a bucket policy is per
// bucket and per store dialect, while an IAM user with an inline policy spans
// several buckets, can be read-only, and is revoked by deleting the user, in the
// same way on every server that speaks IAM.
//
// Every method is idempotent: creating what exists adopts it, deleting what is
// gone succeeds. So a controller can repeat any step after a crash.
package iam

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Mode is what an access may do in one bucket.
type Mode string

// Modes.
const (
	ReadWrite Mode = "ReadWrite"
	ReadOnly  Mode = "ReadOnly"
)

// Grant is one bucket of an access and its mode.
type Grant struct {
	Bucket string
	Mode   Mode
	// ObjectLock: the bucket has object lock; the key may read its objects' retention
	// and legal holds, and never change them (NeverGranted).
	ObjectLock bool
	// Frozen: a move of the bucket cuts over on this store; where bucket policies bind
	// no key (MinIO: BucketPoliciesBindKeys), the policy denies its object writes
	// (FreezeActions). Elsewhere the bucket policy's own freeze holds every key.
	Frozen bool
}

// AccessKey is one key of a user. Secret is set only in CreateKey's answer:
// IAM never returns a secret again, and this package never logs it.
type AccessKey struct {
	ID      string
	Created time.Time
	Secret  string
}

// Driver is everything the operator does on an IAM endpoint. All methods are
// idempotent and return nil or an *Error (classify with KindOf).
type Driver interface {
	// Check sends the cheapest signed call that proves the endpoint answers and
	// the operator may manage users (ListUsers, one item).
	Check(ctx context.Context) error
	// EnsureUser creates the user; an existing user of that name is adopted
	// (the name carries the owner's identity, see UserName).
	EnsureUser(ctx context.Context, user string) error
	// PutPolicy sets the user's one inline policy to the grants.
	PutPolicy(ctx context.Context, user string, grants []Grant) error
	// DeletePolicy removes the user's inline policy, so its keys reach nothing while
	// they last; a missing user or policy is success.
	DeletePolicy(ctx context.Context, user string) error
	// ListKeys returns the user's keys, oldest first, without secrets.
	ListKeys(ctx context.Context, user string) ([]AccessKey, error)
	// CreateKey creates a key and returns it with its secret.
	CreateKey(ctx context.Context, user string) (AccessKey, error)
	// DeleteKey deletes a key; an unknown key is success.
	DeleteKey(ctx context.Context, user, keyID string) error
	// DeleteUser deletes every key, the inline policy and the user; a missing
	// user is success.
	DeleteUser(ctx context.Context, user string) error
	// ListUsers returns one page of at most limit user names after marker ("" for
	// the first page); the page's Next is "" on the last one.
	ListUsers(ctx context.Context, marker string, limit int) (UserPage, error)
}

// UserPage is one page of ListUsers.
type UserPage struct {
	Names []string
	// Next is the marker of the following page; "" when this page is the last.
	Next string
}

// PolicyName is the name of the one inline policy each user carries.
const PolicyName = "bucketkeeper"

// MaxKeys is how many keys a user may have at once: the current one and, during
// a rotation, its successor (AWS's limit too).
const MaxKeys = 2

// Actions per mode: an explicit Allow-only list, never s3:*, which on real
// servers also allows DeleteBucket and PutBucketPolicy. Multipart uploads are
// covered by s3:PutObject (CreateMultipartUpload, UploadPart, Complete).
var (
	bucketActions = map[Mode][]string{
		ReadWrite: {"s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"},
		ReadOnly:  {"s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketLocation"},
	}
	objectActions = map[Mode][]string{
		ReadWrite: {"s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"},
		ReadOnly:  {"s3:GetObject", "s3:GetObjectVersion"},
	}
)

// lockReadActions are what every key may do to the lock of a locked bucket's objects:
// read it.
var lockReadActions = []string{"s3:GetObjectRetention", "s3:GetObjectLegalHold"}

// NeverGranted are the actions no key gets, on any bucket: each would let an
// application weaken an object lock (delete a locked version or its Governance
// retention, change or lift the bucket's lock or default retention, lift a legal hold
// someone else placed: s3:PutObjectLegalHold sets and lifts alike) or take its bucket
// over. s3:PutObjectRetention is among them because no store bounds it to lengthening
// a retention: Versity S3 Gateway keeps no retention per version, so a version's first
// own retention, however short, replaces the bucket's default for it, and on SeaweedFS
// and Versity the same permission lets PutObject's lock headers give a new version a
// shorter retention or a weaker mode than the bucket's default. A tenant that wants
// longer retention asks its claim for it (spec.objectLock.defaultRetention).
// PolicyDocument's tests hold every document against this list.
var NeverGranted = []string{
	"s3:BypassGovernanceRetention", "s3:PutBucketObjectLockConfiguration", "s3:PutObjectLegalHold", "s3:PutObjectRetention",
	"s3:DeleteObjectVersion", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:DeleteBucket",
	"s3:PutBucketVersioning", "s3:PutBucketTagging", "s3:PutLifecycleConfiguration",
}

type statement struct {
	Sid      string   `json:"Sid"`
	Effect   string   `json:"Effect"`
	Action   []string `json:"Action"`
	Resource []string `json:"Resource"`
}

type policyDocument struct {
	Version   string      `json:"Version"`
	Statement []statement `json:"Statement"`
}

// PolicyDocument renders the inline policy for grants: per mode one statement on
// the buckets and one on their objects. The output is deterministic (sorted), so
// an unchanged access writes the same document.
func PolicyDocument(grants []Grant) (string, error) {
	byMode := map[Mode][]string{}
	var locked []string
	for _, g := range grants {
		if g.Bucket == "" {
			return "", fmt.Errorf("iam: empty bucket name in grant")
		}
		if _, ok := bucketActions[g.Mode]; !ok {
			return "", fmt.Errorf("iam: unknown mode %q for bucket %s", g.Mode, g.Bucket)
		}
		byMode[g.Mode] = append(byMode[g.Mode], g.Bucket)
		if g.ObjectLock {
			locked = append(locked, g.Bucket)
		}
	}
	if len(byMode) == 0 {
		return "", fmt.Errorf("iam: a policy needs at least one bucket")
	}
	doc := policyDocument{Version: "2012-10-17"}
	for _, mode := range []Mode{ReadWrite, ReadOnly} {
		buckets := byMode[mode]
		if len(buckets) == 0 {
			continue
		}
		sort.Strings(buckets)
		var onBuckets, onObjects []string
		for _, b := range buckets {
			onBuckets = append(onBuckets, "arn:aws:s3:::"+b)
			onObjects = append(onObjects, "arn:aws:s3:::"+b+"/*")
		}
		doc.Statement = append(doc.Statement,
			statement{Sid: string(mode) + "Buckets", Effect: "Allow", Action: bucketActions[mode], Resource: onBuckets},
			statement{Sid: string(mode) + "Objects", Effect: "Allow", Action: objectActions[mode], Resource: onObjects},
		)
	}
	if len(locked) > 0 {
		doc.Statement = append(doc.Statement, statement{Sid: "ObjectLockRead", Effect: "Allow", Action: lockReadActions, Resource: objectsOf(locked)})
	}
	b, err := json.Marshal(doc)
	return string(b), err
}

// objectsOf is the ARNs of the objects of buckets, sorted.
func objectsOf(buckets []string) []string {
	out := make([]string, 0, len(buckets))
	for _, b := range buckets {
		out = append(out, "arn:aws:s3:::"+b+"/*")
	}
	sort.Strings(out)
	return out
}
