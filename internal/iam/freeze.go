package iam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
)

// A move's cutover stops the source bucket's object writes with a Deny in its bucket
// policy. Most stores hold every key to it; MinIO applies bucket policies to anonymous
// requests only (minio/minio#10578), so there the keys the operator issued are frozen
// through their own policy: a Deny of the same writes on the bucket's objects
// (FreezeSid), which the user's service accounts inherit at once. Keys made by hand on
// the store carry no such policy and are not frozen.

// FreezeSid is the Sid of the statement of a user's policy that denies the object
// writes of the buckets whose moves cut over.
const FreezeSid = "BucketkeeperMoveFreeze"

// FreezeActions are the object writes a move's freeze denies: PutObject covers
// CreateMultipartUpload, UploadPart and CompleteMultipartUpload.
var FreezeActions = []string{
	"s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion", "s3:AbortMultipartUpload",
	"s3:PutObjectTagging", "s3:DeleteObjectTagging", "s3:PutObjectRetention", "s3:PutObjectLegalHold",
}

// BucketPoliciesBindKeys says whether a Deny in a bucket's policy holds the keys the
// IAM API api issues: not on MinIO, which applies bucket policies to anonymous
// requests only.
func BucketPoliciesBindKeys(api API) bool { return api != APIMinIO }

// PolicyEditor reads and writes a user's policy document as the store holds it: how a
// move's freeze narrows the keys of a store whose bucket policies bind none (MinIO).
type PolicyEditor interface {
	// UserPolicy returns the user's policy document, "" when it has none (or there is
	// no such user).
	UserPolicy(ctx context.Context, user string) (string, error)
	// PutUserPolicyDocument replaces the user's policy by doc; a user without a
	// policy is left without one.
	PutUserPolicyDocument(ctx context.Context, user, doc string) error
}

// PolicyEditorOf returns the policy editing of a driver, where it has it.
func PolicyEditorOf(d Driver) (PolicyEditor, bool) {
	e, ok := d.(PolicyEditor)
	return e, ok
}

// freezeStatement denies FreezeActions on the objects of frozen (sorted).
func freezeStatement(frozen []string) map[string]any {
	return map[string]any{"Sid": FreezeSid, "Effect": "Deny", "Action": FreezeActions, "Resource": objectsOf(frozen)}
}

// WithBucketFrozen is a user's policy document doc with bucket's object writes denied
// (frozen) or no longer denied by the freeze statement; the rest is kept as it was.
func WithBucketFrozen(doc, bucket string, frozen bool) (string, error) {
	var p map[string]any
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return "", fmt.Errorf("iam: the user's policy is not JSON: %w", err)
	}
	var statements []any
	switch st := p["Statement"].(type) {
	case []any:
		statements = st
	case map[string]any:
		statements = []any{st}
	}
	var buckets []string
	kept := statements[:0:0]
	for _, st := range statements {
		m, ok := st.(map[string]any)
		if !ok || m["Sid"] != FreezeSid {
			kept = append(kept, st)
			continue
		}
		buckets = append(buckets, frozenBuckets(m["Resource"])...)
	}
	buckets = slices.DeleteFunc(buckets, func(b string) bool { return b == bucket })
	if frozen {
		buckets = append(buckets, bucket)
	}
	sort.Strings(buckets)
	buckets = slices.Compact(buckets)
	if len(buckets) > 0 {
		kept = append(kept, freezeStatement(buckets))
	}
	p["Statement"] = kept
	out, err := json.Marshal(p)
	return string(out), err
}

// frozenBuckets reads the buckets of a freeze statement's Resource (a string or a list
// of "arn:aws:s3:::<bucket>/*").
func frozenBuckets(resource any) []string {
	var arns []string
	switch r := resource.(type) {
	case string:
		arns = []string{r}
	case []any:
		for _, a := range r {
			if s, ok := a.(string); ok {
				arns = append(arns, s)
			}
		}
	}
	var out []string
	for _, a := range arns {
		var b string
		if n, _ := fmt.Sscanf(a, "arn:aws:s3:::%s", &b); n == 1 && len(b) > 2 && b[len(b)-2:] == "/*" {
			out = append(out, b[:len(b)-2])
		}
	}
	return out
}

var _ PolicyEditor = (*minioDriver)(nil)

// UserPolicy reads the user's canned policy (MinIO's info-canned-policy answers the
// document itself, unencrypted).
func (d *minioDriver) UserPolicy(ctx context.Context, user string) (string, error) {
	if err := validMinIOUser("GetUserPolicy", user); err != nil {
		return "", err
	}
	answer, err := d.admin.do(ctx, adminCall{op: "GetUserPolicy", user: user, method: http.MethodGet, path: "info-canned-policy",
		query: url.Values{"name": {minioPolicyName(user)}}})
	if KindOf(err) == KindNoSuchEntity {
		return "", nil
	}
	return string(answer), err
}

// PutUserPolicyDocument rewrites the user's canned policy, which stays attached to it;
// one that is gone is not made again (it would outlive its user unattached).
func (d *minioDriver) PutUserPolicyDocument(ctx context.Context, user, doc string) error {
	current, err := d.UserPolicy(ctx, user)
	if err != nil || current == "" {
		return err
	}
	_, err = d.admin.do(ctx, adminCall{op: "PutUserPolicy", user: user, method: http.MethodPut, path: "add-canned-policy",
		query: url.Values{"name": {minioPolicyName(user)}}, body: []byte(doc)})
	return err
}
