package iam

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestContractMinIOKeyHasNoAdmin: on MinIO any user's key may create, change and
// delete service accounts of its own user unless a policy denies it. A hostile tenant
// holding an access's key tries every admin call that would give it a key the operator
// never issued, change its own, remove another access's, widen its policy, or see or
// make users; each is refused, and afterwards the store holds exactly the users,
// policy and keys it held before. MinIO lets a key remove its own user's keys whatever
// the policy: that, the one thing it can do, reaches no other access. A wrong operator
// secret is InvalidCredentials and never in the error.
func TestContractMinIOKeyHasNoAdmin(t *testing.T) {
	srv := testenv.NewS3(t, testenv.MinIO)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := newDriver(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
	admin := s3Client(t, srv, srv.AccessKeyID, srv.SecretAccessKey)

	wrong := "Wrong" + srv.SecretAccessKey[5:]
	err := newDriver(t, srv, srv.AccessKeyID, wrong).Check(ctx)
	if KindOf(err) != KindInvalidCredentials {
		t.Errorf("Check with a wrong secret: %v, want InvalidCredentials", err)
	}
	if err != nil && strings.Contains(err.Error(), wrong) {
		t.Errorf("the error carries the secret")
	}

	rw := bucket(ctx, t, admin)
	user := UserName("contract", randomHex(16))
	t.Cleanup(func() { _ = d.DeleteUser(context.Background(), user) })
	must(t, "EnsureUser", d.EnsureUser(ctx, user))
	must(t, "PutPolicy", d.PutPolicy(ctx, user, []Grant{{Bucket: rw, Mode: ReadWrite}}))
	key, err := d.CreateKey(ctx, user)
	must(t, "CreateKey", err)
	c := s3Client(t, srv, key.ID, key.Secret)
	waitFor(ctx, t, "the key writes its bucket", func() error { return c.PutObject(ctx, rw, "obj", []byte("x")) })
	// Another access's user and key, which the tenant's key must not reach.
	victim := UserName("contract", randomHex(16))
	t.Cleanup(func() { _ = d.DeleteUser(context.Background(), victim) })
	must(t, "EnsureUser of the other access", d.EnsureUser(ctx, victim))
	must(t, "PutPolicy of the other access", d.PutPolicy(ctx, victim, []Grant{{Bucket: rw, Mode: ReadOnly}}))
	victimKey, err := d.CreateKey(ctx, victim)
	must(t, "CreateKey of the other access", err)
	usersBefore, err := ListUserNames(ctx, d)
	must(t, "ListUsers", err)

	kd, err := New(ctx, Config{API: APIMinIO, Endpoint: srv.Endpoint, Region: srv.Region, AccessKeyID: key.ID, SecretAccessKey: key.Secret,
		Timeout: minioTestTimeout})
	must(t, "the key's admin client", err)
	tenant := kd.(*minioDriver).admin
	seal := func(v any) []byte {
		b, err := json.Marshal(v)
		must(t, "marshal", err)
		return b
	}
	allowAll := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*","admin:*"],"Resource":["arn:aws:s3:::*"]}]}`
	attacks := []adminCall{
		{op: "mint a key of its own", method: http.MethodPut, path: "add-service-account", body: seal(map[string]any{}), sealed: true, opened: true, once: true},
		{op: "mint a key for its user", method: http.MethodPut, path: "add-service-account", body: seal(map[string]any{"targetUser": user}), sealed: true, opened: true, once: true},
		{op: "mint a key with a chosen secret", method: http.MethodPut, path: "add-service-account",
			body: seal(map[string]any{"accessKey": "tenantchosenkey01", "secretKey": "tenant-chosen-secret-1"}), sealed: true, opened: true, once: true},
		{op: "change its own secret", method: http.MethodPost, path: "update-service-account", query: url.Values{"accessKey": {key.ID}},
			body: seal(map[string]any{"newSecretKey": "tenant-chosen-secret-2"}), sealed: true},
		{op: "remove another access's key", method: http.MethodDelete, path: "delete-service-account", query: url.Values{"accessKey": {victimKey.ID}}},
		{op: "attach another policy", method: http.MethodPut, path: "set-user-or-group-policy",
			query: url.Values{"policyName": {"consoleAdmin"}, "userOrGroup": {user}, "isGroup": {"false"}}},
		{op: "rewrite its policy", method: http.MethodPut, path: "add-canned-policy", query: url.Values{"name": {minioPolicyName(user)}}, body: []byte(allowAll)},
		{op: "make a user", method: http.MethodPut, path: "add-user", query: url.Values{"accessKey": {"tenant-made-user"}},
			body: seal(map[string]any{"secretKey": "tenant-user-secret", "status": "enabled"}), sealed: true},
		{op: "list users", method: http.MethodGet, path: "list-users", opened: true},
		{op: "delete a user", method: http.MethodDelete, path: "remove-user", query: url.Values{"accessKey": {user}}},
	}
	for _, a := range attacks {
		_, err := tenant.do(ctx, a)
		refused := KindOf(err) == KindAccessDenied
		if a.path == "delete-service-account" {
			// MinIO answers a key of another user "not found", whatever the policy, so
			// that keys cannot be probed for.
			refused = err != nil
		}
		if !refused {
			t.Errorf("the key could %s: %v, want AccessDenied", a.op, err)
		}
	}
	victimKeys, err := d.ListKeys(ctx, victim)
	must(t, "ListKeys of the other access", err)
	if len(victimKeys) != 1 || victimKeys[0].ID != victimKey.ID {
		t.Errorf("the other access's keys after the attacks: %+v, want only %s", victimKeys, victimKey.ID)
	}

	// Nothing changed: the same users, the one key, its secret still valid, the
	// policy still the operator's (the key reaches its bucket and no other).
	keys, err := d.ListKeys(ctx, user)
	must(t, "ListKeys", err)
	if len(keys) != 1 || keys[0].ID != key.ID {
		t.Errorf("keys after the attacks: %+v, want only %s", keys, key.ID)
	}
	usersAfter, err := ListUserNames(ctx, d)
	must(t, "ListUsers", err)
	if !slices.Equal(usersAfter, usersBefore) {
		t.Errorf("users after the attacks: %v, before: %v", usersAfter, usersBefore)
	}
	must(t, "the key still writes its bucket", c.PutObject(ctx, rw, "after", []byte("x")))
	other := bucket(ctx, t, admin)
	if err := c.PutObject(ctx, other, "x", []byte("x")); err == nil {
		t.Errorf("the key writes a bucket outside its policy after the attacks")
	}
	info, err := d.(*minioDriver).admin.do(ctx, adminCall{op: "UserInfo", method: http.MethodGet, path: "user-info", query: url.Values{"accessKey": {user}}})
	must(t, "user-info", err)
	var ui struct {
		PolicyName string `json:"policyName"`
	}
	must(t, "user-info answer", json.Unmarshal(info, &ui))
	if ui.PolicyName != minioPolicyName(user) {
		t.Errorf("the user's policies after the attacks: %q, want only %q", ui.PolicyName, minioPolicyName(user))
	}

	// MinIO lets a key delete the keys of its own user whatever its policy says (its
	// DeleteServiceAccount handler checks the parent user when the policy refuses):
	// a key can revoke itself, which takes only its own access's key away
	// (docs/access.md says so). The other access keeps its key.
	if _, err := tenant.do(ctx, adminCall{op: "remove its own key", method: http.MethodDelete, path: "delete-service-account",
		query: url.Values{"accessKey": {key.ID}}}); err != nil {
		t.Logf("the key could not remove itself: %v (MinIO let it when this test was written)", err)
	}
	victimKeys, err = d.ListKeys(ctx, victim)
	must(t, "ListKeys of the other access", err)
	if len(victimKeys) != 1 || victimKeys[0].ID != victimKey.ID {
		t.Errorf("the other access's keys after the key removed itself: %+v, want only %s", victimKeys, victimKey.ID)
	}
}

// TestContractMinIOOperatorPolicy: an operator identity that is no root user, holding
// the admin policy docs/access.md gives (read from the page) and S3 on the buckets,
// does all the driver does: users, policies, keys, the user list, and the key it
// issues works.
func TestContractMinIOOperatorPolicy(t *testing.T) {
	srv := testenv.NewS3(t, testenv.MinIO)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := newDriver(t, srv, srv.AccessKeyID, srv.SecretAccessKey).(*minioDriver)

	documented := minioOperatorPolicy(t)
	var policy struct {
		Version   string
		Statement []map[string]any
	}
	must(t, "the documented policy", json.Unmarshal([]byte(documented), &policy))
	policy.Statement = append(policy.Statement, map[string]any{"Effect": "Allow", "Action": []string{"s3:*"}, "Resource": []string{"arn:aws:s3:::*"}})
	body, err := json.Marshal(policy)
	must(t, "marshal", err)
	operator, secret := "bk-operator-"+randomHex(4), randomHex(20)
	t.Cleanup(func() { _ = root.DeleteUser(context.Background(), operator) })
	_, err = root.admin.do(ctx, adminCall{op: "AddUser", method: http.MethodPut, path: "add-user", query: url.Values{"accessKey": {operator}},
		body: []byte(`{"secretKey":"` + secret + `","status":"enabled"}`), sealed: true})
	must(t, "add the operator user", err)
	_, err = root.admin.do(ctx, adminCall{op: "AddPolicy", method: http.MethodPut, path: "add-canned-policy", query: url.Values{"name": {operator}}, body: body})
	must(t, "add the operator's policy", err)
	must(t, "attach the operator's policy", root.setPolicy(ctx, "AttachPolicy", operator, operator))

	d := newDriver(t, srv, operator, secret)
	admin := s3Client(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
	rw := bucket(ctx, t, admin)
	user := UserName("contract", randomHex(16))
	t.Cleanup(func() { _ = root.DeleteUser(context.Background(), user) })
	must(t, "Check", d.Check(ctx))
	must(t, "EnsureUser", d.EnsureUser(ctx, user))
	must(t, "PutPolicy", d.PutPolicy(ctx, user, []Grant{{Bucket: rw, Mode: ReadWrite}}))
	k1, err := d.CreateKey(ctx, user)
	must(t, "CreateKey", err)
	k2, err := d.CreateKey(ctx, user)
	must(t, "CreateKey 2", err)
	c := s3Client(t, srv, k1.ID, k1.Secret)
	waitFor(ctx, t, "the issued key writes its bucket", func() error { return c.PutObject(ctx, rw, "obj", []byte("x")) })
	// A move's freeze: the user's policy read, narrowed and written back; its key is
	// refused writes, reads on, and writes again once thawed.
	for _, frozen := range []bool{true, false} {
		current, err := d.(*minioDriver).UserPolicy(ctx, user)
		must(t, "UserPolicy", err)
		doc, err := WithBucketFrozen(current, rw, frozen)
		must(t, "WithBucketFrozen", err)
		must(t, "PutUserPolicyDocument", d.(*minioDriver).PutUserPolicyDocument(ctx, user, doc))
		err = c.PutObject(ctx, rw, "obj", []byte("y"))
		if frozen && s3.KindOf(err) != s3.KindAccessDenied {
			t.Errorf("the frozen key's write: %v, want AccessDenied", err)
		}
		if !frozen && err != nil {
			t.Errorf("the thawed key's write: %v", err)
		}
		if _, err := c.GetObject(ctx, rw, "obj", 10); err != nil {
			t.Errorf("the key's read (frozen %v): %v", frozen, err)
		}
	}
	keys, err := d.ListKeys(ctx, user)
	must(t, "ListKeys", err)
	if len(keys) != 2 {
		t.Errorf("ListKeys = %+v, want %s and %s", keys, k1.ID, k2.ID)
	}
	must(t, "DeleteKey", d.DeleteKey(ctx, user, k1.ID))
	names, err := ListUserNames(ctx, d)
	must(t, "ListUsers", err)
	if !slices.Contains(names, user) {
		t.Errorf("ListUsers = %v, want %s among them", names, user)
	}
	must(t, "DeletePolicy", d.DeletePolicy(ctx, user))
	must(t, "PutPolicy again", d.PutPolicy(ctx, user, []Grant{{Bucket: rw, Mode: ReadOnly}}))
	must(t, "DeleteUser", d.DeleteUser(ctx, user))
	if _, err := root.ListKeys(ctx, user); KindOf(err) != KindNoSuchEntity {
		t.Errorf("the user after the operator's DeleteUser: %v, want NoSuchEntity", err)
	}
}

// minioOperatorPolicy is the JSON block of docs/access.md's MinIO section.
func minioOperatorPolicy(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	must(t, "RepoRoot", err)
	page, err := os.ReadFile(filepath.Join(root, "docs", "access.md"))
	must(t, "read docs/access.md", err)
	_, section, ok := strings.Cut(string(page), "\n## MinIO\n")
	if ok {
		section, _, _ = strings.Cut(section, "\n## ")
		_, section, ok = strings.Cut(section, "```json\n")
	}
	block, _, ok2 := strings.Cut(section, "```")
	if !ok || !ok2 {
		t.Fatal("docs/access.md has no JSON block in its MinIO section")
	}
	return block
}
