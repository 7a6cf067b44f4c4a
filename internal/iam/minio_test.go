package iam

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMinIODriver walks one access's life on the fake admin API and checks the state
// the fake keeps after each step: the user, the one canned policy attached to it, the
// service accounts, and that each step repeated changes nothing.
func TestMinIODriver(t *testing.T) {
	f := newFakeMinIO(t)
	d := f.driver(t, f.secret, nil)
	ctx := t.Context()
	user := UserName("contract", randomHex(16))
	grants := []Grant{{Bucket: "rw", Mode: ReadWrite}, {Bucket: "ro", Mode: ReadOnly}}

	must(t, "Check", d.Check(ctx))
	must(t, "EnsureUser", d.EnsureUser(ctx, user))
	must(t, "EnsureUser again", d.EnsureUser(ctx, user))
	if f.count("add-user") != 1 || !f.state().users[user] {
		t.Fatalf("add-user sent %d times; %s", f.count("add-user"), f)
	}
	must(t, "PutPolicy", d.PutPolicy(ctx, user, grants))
	must(t, "PutPolicy again", d.PutPolicy(ctx, user, grants))
	want, _ := MinIOPolicyDocument(grants)
	if st := f.state(); st.mapping[user] != user || st.policies[user] != want {
		t.Fatalf("after PutPolicy: %s; policy %s", f, st.policies[user])
	}

	k1, err := d.CreateKey(ctx, user)
	must(t, "CreateKey", err)
	if k1.ID == "" || k1.Secret == "" || k1.Created.IsZero() {
		t.Fatalf("CreateKey = id %q, a secret of %d characters, created %v", k1.ID, len(k1.Secret), k1.Created)
	}
	k2, err := d.CreateKey(ctx, user)
	must(t, "CreateKey 2", err)
	keys, err := d.ListKeys(ctx, user)
	must(t, "ListKeys", err)
	if len(keys) != 2 || keys[0].ID != k1.ID || keys[1].ID != k2.ID || keys[0].Secret != "" || !keys[0].Created.Equal(k1.Created) {
		t.Fatalf("ListKeys = %+v, want %s then %s, dated, without secrets", keys, k1.ID, k2.ID)
	}

	must(t, "DeleteKey", d.DeleteKey(ctx, user, k1.ID))
	must(t, "DeleteKey again", d.DeleteKey(ctx, user, k1.ID))
	if st := f.state(); st.keys[k1.ID] != (fakeKey{}) || len(st.keys) != 1 {
		t.Fatalf("after DeleteKey: %s", f)
	}

	must(t, "DeletePolicy", d.DeletePolicy(ctx, user))
	must(t, "DeletePolicy again", d.DeletePolicy(ctx, user))
	if st := f.state(); st.mapping[user] != "" || st.policies[user] != "" {
		t.Fatalf("after DeletePolicy: %s", f)
	}
	must(t, "PutPolicy after DeletePolicy", d.PutPolicy(ctx, user, grants))

	must(t, "DeleteUser", d.DeleteUser(ctx, user))
	must(t, "DeleteUser again", d.DeleteUser(ctx, user))
	if st := f.state(); len(st.users) != 0 || len(st.policies) != 0 || len(st.mapping) != 0 || len(st.keys) != 0 {
		t.Fatalf("after DeleteUser: %s", f)
	}
	if _, err := d.ListKeys(ctx, user); KindOf(err) != KindNoSuchEntity {
		t.Errorf("ListKeys of a deleted user: %v, want NoSuchEntity", err)
	}
	must(t, "DeletePolicy of a deleted user", d.DeletePolicy(ctx, user))
	cannedBefore := f.count("add-canned-policy")
	if err := d.PutPolicy(ctx, user, grants); KindOf(err) != KindNoSuchEntity {
		t.Errorf("PutPolicy of a deleted user: %v, want NoSuchEntity", err)
	}
	if _, err := d.CreateKey(ctx, user); KindOf(err) != KindNoSuchEntity {
		t.Errorf("CreateKey of a deleted user: %v, want NoSuchEntity", err)
	}
	if st := f.state(); f.count("add-canned-policy") != cannedBefore || len(st.policies) != 0 || len(st.keys) != 0 {
		t.Errorf("a deleted user's PutPolicy or CreateKey made something: %s", f)
	}
}

// TestMinIODeleteKeyOnlyOfItsUser: MinIO deletes a service account by its key alone;
// the driver deletes none but the named user's, so a key of another access survives a
// DeleteKey that names it with the wrong user.
func TestMinIODeleteKeyOnlyOfItsUser(t *testing.T) {
	f := newFakeMinIO(t)
	d := f.driver(t, f.secret, nil)
	ctx := t.Context()
	a, b := UserName("c", randomHex(16)), UserName("c", randomHex(16))
	must(t, "EnsureUser a", d.EnsureUser(ctx, a))
	must(t, "EnsureUser b", d.EnsureUser(ctx, b))
	kb, err := d.CreateKey(ctx, b)
	must(t, "CreateKey b", err)
	must(t, "DeleteKey of b's key as a", d.DeleteKey(ctx, a, kb.ID))
	if _, ok := f.state().keys[kb.ID]; !ok || f.count("delete-service-account") != 0 {
		t.Fatalf("b's key went with a DeleteKey naming a: %s", f)
	}
	must(t, "DeleteUser a", d.DeleteUser(ctx, a))
	if st := f.state(); st.keys[kb.ID] == (fakeKey{}) || !st.users[b] {
		t.Fatalf("DeleteUser of a touched b: %s", f)
	}
}

// TestMinIOListUsersPages: MinIO answers every user at once; the driver pages them in
// name order, each exactly once, and ends with Next "".
func TestMinIOListUsersPages(t *testing.T) {
	f := newFakeMinIO(t)
	d := f.driver(t, f.secret, nil)
	ctx := t.Context()
	var made []string
	for range 5 {
		u := UserName("c", randomHex(16))
		must(t, "EnsureUser", d.EnsureUser(ctx, u))
		made = append(made, u)
	}
	slices.Sort(made)
	var seen []string
	marker := ""
	for pages := 1; ; pages++ {
		page, err := d.ListUsers(ctx, marker, 2)
		must(t, "ListUsers", err)
		if len(page.Names) > 2 || pages > 3 {
			t.Fatalf("page %d: %v", pages, page)
		}
		seen = append(seen, page.Names...)
		if page.Next == "" {
			break
		}
		marker = page.Next
	}
	if !slices.Equal(seen, made) {
		t.Errorf("pages listed %v, want %v", seen, made)
	}
	all, err := ListUserNames(ctx, d)
	must(t, "ListUserNames", err)
	if !slices.Equal(all, made) {
		t.Errorf("ListUserNames = %v", all)
	}
}

// TestMinIOPolicyDocument: the canned policy grants exactly what PolicyDocument grants
// (so no action of NeverGranted) and denies the user's keys any key of their own.
func TestMinIOPolicyDocument(t *testing.T) {
	grants := []Grant{{Bucket: "a", Mode: ReadWrite, ObjectLock: true}, {Bucket: "b", Mode: ReadOnly}}
	doc, err := MinIOPolicyDocument(grants)
	must(t, "MinIOPolicyDocument", err)
	plain, _ := PolicyDocument(grants)
	var got, base struct {
		Version   string
		Statement []struct {
			Effect   string
			Action   []string
			Resource []string
		}
	}
	must(t, "parse", json.Unmarshal([]byte(doc), &got))
	must(t, "parse", json.Unmarshal([]byte(plain), &base))
	if got.Version != base.Version || len(got.Statement) != len(base.Statement)+1 {
		t.Fatalf("statements: %s", doc)
	}
	for i, s := range base.Statement {
		if !slices.Equal(got.Statement[i].Action, s.Action) || !slices.Equal(got.Statement[i].Resource, s.Resource) || got.Statement[i].Effect != "Allow" {
			t.Errorf("statement %d = %+v, want %+v", i, got.Statement[i], s)
		}
	}
	for _, s := range got.Statement {
		for _, a := range s.Action {
			if s.Effect == "Allow" && slices.Contains(NeverGranted, a) {
				t.Errorf("%s is granted", a)
			}
		}
	}
	deny := got.Statement[len(got.Statement)-1]
	if deny.Effect != "Deny" || !slices.Equal(deny.Action, minioSelfService) {
		t.Errorf("last statement = %+v, want a Deny of %v", deny, minioSelfService)
	}
	if _, err := MinIOPolicyDocument(nil); err == nil {
		t.Error("a policy without buckets was rendered")
	}
}

// TestMinIOErrors: the failures the controller acts on are classified, no error
// carries a secret, every call ends by its deadline, answers are read only up to their
// bound, a tampered answer is refused, and only idempotent calls are repeated.
func TestMinIOErrors(t *testing.T) {
	f := newFakeMinIO(t)
	ctx := t.Context()
	user := UserName("c", randomHex(16))

	wrong := "Wrong" + f.secret[5:]
	err := f.driver(t, wrong, nil).Check(ctx)
	if KindOf(err) != KindInvalidCredentials {
		t.Errorf("Check with a wrong secret: %v, want InvalidCredentials", err)
	}
	if err != nil && (strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), f.secret)) {
		t.Errorf("the error carries a secret: %v", err)
	}

	addr, err := testenv.FreeAddr()
	must(t, "free address", err)
	closed, err := New(ctx, Config{API: APIMinIO, Endpoint: "http://" + addr, AccessKeyID: "AK", SecretAccessKey: "SK", Timeout: 5 * time.Second})
	must(t, "New", err)
	if err := closed.Check(ctx); KindOf(err) != KindUnreachable {
		t.Errorf("Check of a closed port: %v, want Unreachable", err)
	}
	if _, err := New(ctx, Config{API: APIMinIO, Endpoint: f.srv.URL}); err == nil {
		t.Error("a MinIO driver without static keys was built")
	}

	var mu sync.Mutex
	var attempts []string
	d := f.driver(t, f.secret, func(op string, status int, _ error) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, fmt.Sprintf("%s %d", op, status))
	})
	if err := d.EnsureUser(ctx, "not valid/"); KindOf(err) != KindInvalid {
		t.Errorf("EnsureUser of an invalid name: %v, want Invalid", err)
	}
	if err := d.EnsureUser(ctx, "a=b"); KindOf(err) != KindInvalid {
		t.Errorf("EnsureUser of a name MinIO reserves: %v, want Invalid", err)
	}
	if f.count("user-info") != 0 {
		t.Errorf("an invalid name reached the server")
	}
	if err := d.PutPolicy(ctx, user, []Grant{{Bucket: "b", Mode: "Everything"}}); KindOf(err) != KindInvalid {
		t.Errorf("PutPolicy with an unknown mode: %v, want Invalid", err)
	}
	f.failNext("user-info", 403, "AccessDenied")
	if err := d.EnsureUser(ctx, user); KindOf(err) != KindAccessDenied {
		t.Errorf("EnsureUser refused: %v, want AccessDenied", err)
	}

	// A server error is repeated for an idempotent call, never for CreateKey.
	must(t, "EnsureUser", d.EnsureUser(ctx, user))
	mu.Lock()
	attempts = nil
	mu.Unlock()
	f.failNext("user-info", 503, "XMinioServerNotInitialized")
	must(t, "ListKeys after one 503", func() error { _, err := d.ListKeys(ctx, user); return err }())
	f.failNext("add-service-account", 500, "InternalError")
	if _, err := d.CreateKey(ctx, user); err == nil || f.count("add-service-account") != 1 {
		t.Errorf("CreateKey after a 500: %v, sent %d times, want an error after one", err, f.count("add-service-account"))
	}
	mu.Lock()
	if want := []string{"user-info 503", "user-info 200", "list-service-accounts 200", "add-service-account 500"}; !slices.Equal(attempts, want) {
		t.Errorf("observed attempts %q, want %q", attempts, want)
	}
	mu.Unlock()

	// A tampered or oversized answer is refused, not read.
	f.setAnswer("list-users", []byte(strings.Repeat("x", maxAdminUserList+1)))
	if err := d.Check(ctx); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversized user list: %v", err)
	}
	sealed, _ := encryptAdminBody(context.Background(), f.secret, []byte(`{}`))
	sealed[len(sealed)-1] ^= 1
	f.setAnswer("list-users", sealed)
	if err := d.Check(ctx); err == nil || !strings.Contains(err.Error(), "not authentic") {
		t.Errorf("a tampered user list: %v", err)
	}
	f.setAnswer("list-users", nil)

	// Another call deriving a key holds the one argon2id slot: this one, its answer in
	// hand, waits for the slot no longer than its deadline.
	short, err := New(ctx, Config{API: APIMinIO, Endpoint: f.srv.URL, AccessKeyID: f.accessKey, SecretAccessKey: f.secret, Timeout: 300 * time.Millisecond})
	must(t, "New", err)
	list, _ := encryptAdminBody(context.Background(), f.secret, []byte(`{}`))
	f.setAnswer("list-users", list) // the fake answers without a slot
	argon2Slot <- struct{}{}
	sent := f.count("list-users")
	start := time.Now()
	err = short.Check(ctx)
	<-argon2Slot
	f.setAnswer("list-users", nil)
	if KindOf(err) != KindTimeout || time.Since(start) > 5*time.Second || f.count("list-users") != sent+1 {
		t.Errorf("Check while the slot is taken: %v after %v (list-users sent %d times), want Timeout by its deadline", err, time.Since(start), f.count("list-users")-sent)
	}

	// A server that does not answer: the call ends by its deadline.
	release := make(chan struct{})
	f.setHold("user-info", release)
	defer close(release)
	start = time.Now()
	if err := short.EnsureUser(ctx, user); KindOf(err) != KindTimeout {
		t.Errorf("EnsureUser of a silent server: %v, want Timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the call took %v past a 300ms deadline", took)
	}
}
