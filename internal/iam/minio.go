package iam

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// The MinIO driver gives each access the same shape over MinIO's admin API, which
// MinIO serves instead of IAM:
//
//   - the user: a MinIO user of the access's name, with a random password that nobody
//     keeps (no one signs in as the user);
//   - its policy: a canned policy of the same name holding PolicyDocument's grants,
//     attached to the user and to nothing else, plus a Deny of the admin actions by
//     which a user's own key could mint, change or remove keys of that user;
//   - its keys: service accounts of the user without a policy of their own, so they
//     inherit the user's: a policy change reaches every key at once, and a user
//     without a policy leaves its keys nothing (MinIO refuses every request of a
//     service account whose parent has no policy).
//
// MinIO's admin API encrypts the bodies that carry secrets (minio_crypto.go); the
// others are plain JSON. Its answers name no creation time of a service account: the
// driver writes it into the account's description and reads it back.

// API says which API manages a store's users.
type API string

// APIs.
const (
	// APIAWS is the AWS IAM API (AWS, Versity, SeaweedFS, Ceph RGW); the default.
	APIAWS API = "AWS"
	// APIMinIO is MinIO's admin API.
	APIMinIO API = "MinIO"
)

// minioKeyDescription starts the description of every service account the driver
// makes; the creation time follows.
const minioKeyDescription = "bucketkeeper key created "

// minioSelfService are the admin actions MinIO lets any user's key do to its own
// user's service accounts unless a policy denies them: an application could otherwise
// mint a key the operator never issued, or change its own.
var minioSelfService = []string{"admin:CreateServiceAccount", "admin:UpdateServiceAccount", "admin:RemoveServiceAccount"}

type minioDriver struct {
	admin *adminClient
}

var _ Driver = (*minioDriver)(nil)

// newMinIO builds the MinIO driver. It needs the operator's static keys: the secret
// key is also the password of the encrypted bodies. It sends no request.
func newMinIO(cfg Config) (Driver, error) {
	if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
		return nil, errors.New("iam: MinIO's admin API needs the operator's access key and secret key (credentialsSecretRef)")
	}
	if cfg.Endpoint == "" {
		return nil, errors.New("iam: MinIO's admin API needs an endpoint")
	}
	if _, err := s3.EndpointURL(cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	endpoint, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("iam: endpoint: %w", err)
	}
	region := cfg.Region
	if region == "" {
		region = DefaultRegion
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	httpClient, err := s3.NewHTTPClient(cfg.CABundle, cfg.InsecureSkipTLSVerify, timeout)
	if err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	return &minioDriver{admin: &adminClient{
		endpoint: endpoint,
		region:   region,
		creds:    aws.Credentials{AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey, SessionToken: cfg.SessionToken},
		http:     httpClient,
		signer:   v4.NewSigner(),
		timeout:  timeout,
		observer: cfg.Observer,
	}}, nil
}

// validMinIOUser: an IAM user name MinIO also takes as an access key (it reserves '='
// and ',', and wants three characters).
func validMinIOUser(op, user string) error {
	if !ValidUserName(user) || strings.ContainsAny(user, "=,") || len(user) < 3 {
		return &Error{Op: op, User: user, Kind: KindInvalid, msg: "not a valid MinIO user name"}
	}
	return nil
}

// minioPolicyName is the canned policy of a user: MinIO's policies are global, so
// each user's has the user's own name.
func minioPolicyName(user string) string { return user }

// MinIOPolicyDocument renders the canned policy of grants on MinIO: PolicyDocument's
// statements, a Deny of the self-service admin actions and, for the frozen grants, the
// move freeze's Deny of their object writes (FreezeSid).
func MinIOPolicyDocument(grants []Grant) (string, error) {
	doc, err := PolicyDocument(grants)
	if err != nil {
		return "", err
	}
	var parsed struct {
		Version   string            `json:"Version"`
		Statement []json.RawMessage `json:"Statement"`
	}
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		return "", err
	}
	deny, err := json.Marshal(struct {
		Sid    string   `json:"Sid"`
		Effect string   `json:"Effect"`
		Action []string `json:"Action"`
	}{"NoKeysOfItsOwn", "Deny", minioSelfService})
	if err != nil {
		return "", err
	}
	parsed.Statement = append(parsed.Statement, deny)
	var frozen []string
	for _, g := range grants {
		if g.Frozen {
			frozen = append(frozen, g.Bucket)
		}
	}
	if len(frozen) > 0 {
		sort.Strings(frozen)
		st, err := json.Marshal(freezeStatement(frozen))
		if err != nil {
			return "", err
		}
		parsed.Statement = append(parsed.Statement, st)
	}
	out, err := json.Marshal(parsed)
	return string(out), err
}

func (d *minioDriver) Check(ctx context.Context) error {
	_, err := d.users(ctx, "Check")
	return err
}

// userInfo proves the user exists (a plain, unencrypted call).
func (d *minioDriver) userInfo(ctx context.Context, op, user string) error {
	_, err := d.admin.do(ctx, adminCall{op: op, user: user, method: http.MethodGet, path: "user-info", query: url.Values{"accessKey": {user}}})
	return err
}

func (d *minioDriver) EnsureUser(ctx context.Context, user string) error {
	if err := validMinIOUser("CreateUser", user); err != nil {
		return err
	}
	err := d.userInfo(ctx, "CreateUser", user)
	if KindOf(err) != KindNoSuchEntity {
		return err // nil: the name is derived from our own object, so the user is ours
	}
	body, err := json.Marshal(struct {
		SecretKey string `json:"secretKey"`
		Status    string `json:"status"`
	}{rand.Text() + rand.Text(), "enabled"}) // 52 characters nobody keeps
	if err != nil {
		return &Error{Op: "CreateUser", User: user, Kind: KindUnknown, msg: err.Error()}
	}
	_, err = d.admin.do(ctx, adminCall{op: "CreateUser", user: user, method: http.MethodPut, path: "add-user",
		query: url.Values{"accessKey": {user}}, body: body, sealed: true})
	return err
}

func (d *minioDriver) PutPolicy(ctx context.Context, user string, grants []Grant) error {
	doc, err := MinIOPolicyDocument(grants)
	if err != nil {
		return &Error{Op: "PutUserPolicy", User: user, Kind: KindInvalid, msg: err.Error()}
	}
	if err := validMinIOUser("PutUserPolicy", user); err != nil {
		return err
	}
	// A missing user gets no policy: the canned policy would outlive it unattached.
	if err := d.userInfo(ctx, "PutUserPolicy", user); err != nil {
		return err
	}
	if _, err := d.admin.do(ctx, adminCall{op: "PutUserPolicy", user: user, method: http.MethodPut, path: "add-canned-policy",
		query: url.Values{"name": {minioPolicyName(user)}}, body: []byte(doc)}); err != nil {
		return err
	}
	err = d.setPolicy(ctx, "PutUserPolicy", user, minioPolicyName(user))
	if KindOf(err) == KindNoSuchEntity {
		// The user went between the two calls: take its policy back with it.
		_ = d.removePolicy(ctx, user)
	}
	return err
}

// setPolicy makes policy the only one attached to user ("" attaches none). MinIO's
// set-user-or-group-policy replaces the user's list, so repeating it changes nothing.
func (d *minioDriver) setPolicy(ctx context.Context, op, user, policy string) error {
	_, err := d.admin.do(ctx, adminCall{op: op, user: user, method: http.MethodPut, path: "set-user-or-group-policy",
		query: url.Values{"policyName": {policy}, "userOrGroup": {user}, "isGroup": {"false"}}})
	return err
}

// removePolicy deletes the user's canned policy; a missing one is success.
func (d *minioDriver) removePolicy(ctx context.Context, user string) error {
	_, err := d.admin.do(ctx, adminCall{op: "DeleteUserPolicy", user: user, method: http.MethodDelete, path: "remove-canned-policy",
		query: url.Values{"name": {minioPolicyName(user)}}})
	return goneIsDone(err)
}

func (d *minioDriver) DeletePolicy(ctx context.Context, user string) error {
	if err := validMinIOUser("DeleteUserPolicy", user); err != nil {
		return err
	}
	// Detach first: MinIO refuses to delete a policy in use. A missing user has none
	// attached, but may have left its canned policy behind.
	if err := goneIsDone(d.setPolicy(ctx, "DeleteUserPolicy", user, "")); err != nil {
		return err
	}
	return d.removePolicy(ctx, user)
}

// minioKey is one service account as list-service-accounts answers it.
type minioKey struct {
	ParentUser  string `json:"parentUser"`
	AccessKey   string `json:"accessKey"`
	Description string `json:"description"`
}

// keys lists the user's service accounts (MinIO lists none for a missing user).
func (d *minioDriver) keys(ctx context.Context, op, user string) ([]AccessKey, error) {
	answer, err := d.admin.do(ctx, adminCall{op: op, user: user, method: http.MethodGet, path: "list-service-accounts",
		query: url.Values{"user": {user}}, opened: true})
	if err != nil {
		return nil, err
	}
	var list struct {
		Accounts []minioKey `json:"accounts"`
	}
	if err := json.Unmarshal(answer, &list); err != nil {
		return nil, &Error{Op: op, User: user, Kind: KindUnknown, msg: "reading the service accounts: " + err.Error()}
	}
	var keys []AccessKey
	for _, a := range list.Accounts {
		if a.ParentUser != user || a.AccessKey == "" {
			continue
		}
		k := AccessKey{ID: a.AccessKey}
		if at, ok := strings.CutPrefix(a.Description, minioKeyDescription); ok {
			k.Created, _ = time.Parse(time.RFC3339Nano, at) // zero if someone else wrote it
		}
		keys = append(keys, k)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if !keys[i].Created.Equal(keys[j].Created) {
			return keys[i].Created.Before(keys[j].Created)
		}
		return keys[i].ID < keys[j].ID
	})
	return keys, nil
}

func (d *minioDriver) ListKeys(ctx context.Context, user string) ([]AccessKey, error) {
	if err := validMinIOUser("ListAccessKeys", user); err != nil {
		return nil, err
	}
	// As AWS does, a missing user is NoSuchEntity, not an empty list: the controller
	// creates the user again.
	if err := d.userInfo(ctx, "ListAccessKeys", user); err != nil {
		return nil, err
	}
	return d.keys(ctx, "ListAccessKeys", user)
}

func (d *minioDriver) CreateKey(ctx context.Context, user string) (AccessKey, error) {
	if err := validMinIOUser("CreateAccessKey", user); err != nil {
		return AccessKey{}, err
	}
	created := time.Now().UTC()
	body, err := json.Marshal(struct {
		TargetUser  string `json:"targetUser"`
		Description string `json:"description"`
	}{user, minioKeyDescription + created.Format(time.RFC3339Nano)})
	if err != nil {
		return AccessKey{}, &Error{Op: "CreateAccessKey", User: user, Kind: KindUnknown, msg: err.Error()}
	}
	// One attempt: a retry after a lost answer makes a second key (see client.CreateKey).
	answer, err := d.admin.do(ctx, adminCall{op: "CreateAccessKey", user: user, method: http.MethodPut, path: "add-service-account",
		body: body, sealed: true, opened: true, once: true})
	if err != nil {
		return AccessKey{}, err
	}
	var out struct {
		Credentials struct {
			AccessKey string `json:"accessKey"`
			SecretKey string `json:"secretKey"`
		} `json:"credentials"`
	}
	if err := json.Unmarshal(answer, &out); err != nil || out.Credentials.AccessKey == "" || out.Credentials.SecretKey == "" {
		return AccessKey{}, &Error{Op: "CreateAccessKey", User: user, Kind: KindUnknown, msg: "answer without an access key"}
	}
	return AccessKey{ID: out.Credentials.AccessKey, Secret: out.Credentials.SecretKey, Created: created}, nil
}

func (d *minioDriver) DeleteKey(ctx context.Context, user, keyID string) error {
	if err := validMinIOUser("DeleteAccessKey", user); err != nil {
		return err
	}
	// MinIO deletes any service account by its key alone: only one of this user's
	// is ours to delete. Another's, or an unknown one, is "not this user's key".
	keys, err := d.keys(ctx, "DeleteAccessKey", user)
	if err != nil {
		return goneIsDone(err)
	}
	if !slices.ContainsFunc(keys, func(k AccessKey) bool { return k.ID == keyID }) {
		return nil
	}
	_, err = d.admin.do(ctx, adminCall{op: "DeleteAccessKey", user: user, method: http.MethodDelete, path: "delete-service-account",
		query: url.Values{"accessKey": {keyID}}})
	return goneIsDone(err)
}

func (d *minioDriver) DeleteUser(ctx context.Context, user string) error {
	if err := validMinIOUser("DeleteUser", user); err != nil {
		return err
	}
	// MinIO's remove-user deletes the user's service accounts and its policy mapping
	// with it; the canned policy goes after, once nothing uses it.
	_, err := d.admin.do(ctx, adminCall{op: "DeleteUser", user: user, method: http.MethodDelete, path: "remove-user",
		query: url.Values{"accessKey": {user}}})
	if err := goneIsDone(err); err != nil {
		return err
	}
	return d.removePolicy(ctx, user)
}

// users lists every user name, sorted (MinIO answers them all at once, encrypted).
func (d *minioDriver) users(ctx context.Context, op string) ([]string, error) {
	answer, err := d.admin.do(ctx, adminCall{op: op, method: http.MethodGet, path: "list-users", opened: true, limit: maxAdminUserList})
	if err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(answer, &all); err != nil {
		return nil, &Error{Op: op, Kind: KindUnknown, msg: "reading the user list: " + err.Error()}
	}
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// ListUsers pages MinIO's one list itself: the names after marker, in order.
func (d *minioDriver) ListUsers(ctx context.Context, marker string, limit int) (UserPage, error) {
	names, err := d.users(ctx, "ListUsers")
	if err != nil {
		return UserPage{}, err
	}
	limit = min(max(limit, 1), 1000)
	start := sort.SearchStrings(names, marker)
	if start < len(names) && names[start] == marker && marker != "" {
		start++
	}
	end := min(start+limit, len(names))
	page := UserPage{Names: names[start:end]}
	if end < len(names) {
		page.Next = names[end-1]
	}
	return page, nil
}
