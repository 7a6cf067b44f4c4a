package iam

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The contract test runs the driver against real SeaweedFS, Versity, Ceph RGW and
// MinIO servers (MinIO through its admin API) and proves what a per-access key may and
// may not do there: the scoping is the servers' own, so only a real server can show it.

// keyLimit is what a third CreateAccessKey answers per server: Versity enforces
// AWS's two keys per user, RGW allows four ("Access key limit 4 exceeded" on the
// fifth), SeaweedFS and MinIO have no limit (the controller keeps at most two either
// way).
var keyLimit = map[testenv.S3Kind]Kind{
	testenv.SeaweedFS: KindUnknown, // succeeds
	testenv.Versity:   KindLimitExceeded,
	testenv.RGW:       KindUnknown, // succeeds: the limit is four
	testenv.MinIO:     KindUnknown, // succeeds
}

// iamKinds are the stores the contract runs on; roleKinds those of them that serve
// roles (MinIO's admin API has none).
var (
	iamKinds  = []testenv.S3Kind{testenv.SeaweedFS, testenv.Versity, testenv.RGW, testenv.MinIO}
	roleKinds = map[testenv.S3Kind]bool{testenv.SeaweedFS: true, testenv.Versity: true, testenv.RGW: true}
)

// separateAccounts are the kinds whose second identity (OtherAccessKeyID) is the
// root of another IAM account, which must not see or touch our users: RGW's
// accounts. (SeaweedFS's second identity is a gateway admin, Versity's an IAM
// user of our own account.)
var separateAccounts = map[testenv.S3Kind]bool{testenv.RGW: true}

func TestContract(t *testing.T) {
	for _, kind := range iamKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			srv := testenv.NewS3(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			runContract(ctx, t, srv)
			if !roleKinds[kind] {
				return
			}
			t.Run("roles", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				if kind == testenv.RGW {
					// RGW checks tokens with STS on, which changes its answer to a
					// wrong key (testenv.S3Options.RGWSTS): a server of its own.
					srv = testenv.NewS3With(t, kind, testenv.S3Options{RGWSTS: true})
				}
				runRolesContract(ctx, t, srv)
			})
		})
	}
}

func runContract(ctx context.Context, t *testing.T, srv *testenv.S3Server) {
	d := newDriver(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
	admin := s3Client(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
	must(t, "Check", d.Check(ctx))

	rw, other, ro := bucket(ctx, t, admin), bucket(ctx, t, admin), bucket(ctx, t, admin)
	must(t, "admin PutObject ro", admin.PutObject(ctx, ro, "seed", []byte("seed")))
	must(t, "admin PutObject other", admin.PutObject(ctx, other, "seed", []byte("seed")))

	user := UserName("contract", randomHex(16))
	t.Cleanup(func() { _ = d.DeleteUser(context.Background(), user) })
	must(t, "EnsureUser", d.EnsureUser(ctx, user))
	must(t, "EnsureUser again", d.EnsureUser(ctx, user))
	grants := []Grant{{Bucket: rw, Mode: ReadWrite}, {Bucket: ro, Mode: ReadOnly}}
	must(t, "PutPolicy", d.PutPolicy(ctx, user, grants))
	must(t, "PutPolicy again", d.PutPolicy(ctx, user, grants))
	key1, err := d.CreateKey(ctx, user)
	must(t, "CreateKey", err)
	if key1.ID == "" || key1.Secret == "" {
		t.Fatalf("CreateKey answered id %q and a secret of %d characters", key1.ID, len(key1.Secret))
	}
	keys, err := d.ListKeys(ctx, user)
	must(t, "ListKeys", err)
	if len(keys) != 1 || keys[0].ID != key1.ID || keys[0].Secret != "" {
		t.Fatalf("ListKeys = %+v, want only %s without secret", keys, key1.ID)
	}

	c1 := s3Client(t, srv, key1.ID, key1.Secret)
	waitFor(ctx, t, "the new key writes its bucket", func() error { return c1.PutObject(ctx, rw, "app/obj", []byte("hello")) })
	iamTable.Set(t, srv.Kind, rowIssue, "yes")
	body, err := c1.GetObject(ctx, rw, "app/obj", 100)
	must(t, "GetObject own bucket", err)
	if string(body) != "hello" {
		t.Errorf("GetObject = %q", body)
	}
	_, err = c1.ListObjectVersions(ctx, rw, nil)
	must(t, "list own bucket", err)
	must(t, "DeleteObject own bucket", c1.DeleteObject(ctx, rw, "app/obj"))

	denied := func(what string, err error) {
		t.Helper()
		if s3.KindOf(err) != s3.KindAccessDenied {
			t.Errorf("%s: %v, want AccessDenied", what, err)
		}
	}
	denied("PutObject other bucket", c1.PutObject(ctx, other, "x", []byte("x")))
	_, err = c1.GetObject(ctx, other, "seed", 100)
	denied("GetObject other bucket", err)
	denied("CreateBucket", c1.CreateBucket(ctx, "bk-"+randomHex(8), ""))
	denied("PutBucketPolicy own bucket", c1.PutBucketPolicy(ctx, rw, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::`+rw+`/*"]}]}`))
	denied("DeleteBucket own bucket", c1.DeleteBucket(ctx, rw))
	iamTable.Set(t, srv.Kind, rowScope, "yes")
	denied("PutObject read-only bucket", c1.PutObject(ctx, ro, "x", []byte("x")))
	denied("DeleteObject read-only bucket", c1.DeleteObject(ctx, ro, "seed"))
	body, err = c1.GetObject(ctx, ro, "seed", 100)
	must(t, "GetObject read-only bucket", err)
	if string(body) != "seed" {
		t.Errorf("GetObject read-only = %q", body)
	}
	iamTable.Set(t, srv.Kind, rowReadOnly, "yes")

	// Narrowing (a parked access): without its policy the key reaches none of its
	// buckets, and with the policy back the same key reaches them again.
	must(t, "DeletePolicy", d.DeletePolicy(ctx, user))
	must(t, "DeletePolicy again", d.DeletePolicy(ctx, user))
	waitFor(ctx, t, "the key without a policy is refused", func() error {
		if err := c1.PutObject(ctx, rw, "narrowed", []byte("x")); s3.KindOf(err) != s3.KindAccessDenied {
			return fmt.Errorf("PutObject without a policy: %v, want AccessDenied", err)
		}
		return nil
	})
	_, err = c1.GetObject(ctx, ro, "seed", 100)
	denied("GetObject read-only bucket without a policy", err)
	must(t, "PutPolicy after DeletePolicy", d.PutPolicy(ctx, user, grants))
	waitFor(ctx, t, "the key with its policy back writes", func() error { return c1.PutObject(ctx, rw, "back", []byte("x")) })

	if _, err := admin.HeadBucket(ctx, other); err != nil {
		t.Errorf("the other bucket was touched: %v", err)
	}
	if separateAccounts[srv.Kind] {
		testOtherAccount(ctx, t, srv, user, key1.ID, func() error { return c1.PutObject(ctx, rw, "still", []byte("mine")) })
	}
	iamTable.Set(t, srv.Kind, rowOtherAccount, otherAccountCell[srv.Kind])

	// Rotation's two keys; a third is the server's business.
	key2, err := d.CreateKey(ctx, user)
	must(t, "CreateKey 2", err)
	key3, err := d.CreateKey(ctx, user)
	if want := keyLimit[srv.Kind]; KindOf(err) != want || (want == KindUnknown && err != nil) {
		t.Errorf("third CreateKey: %v, want kind %v", err, want)
	}
	iamTable.Set(t, srv.Kind, rowKeyLimit, errorCell(err, "made (the operator keeps at most two)"))
	if err == nil {
		must(t, "DeleteKey 3", d.DeleteKey(ctx, user, key3.ID))
	}
	c2 := s3Client(t, srv, key2.ID, key2.Secret)
	waitFor(ctx, t, "key 2 works", func() error { return c2.PutObject(ctx, rw, "k2", []byte("2")) })

	// Revocation: a deleted key stops working, the other one does not.
	must(t, "DeleteKey 1", d.DeleteKey(ctx, user, key1.ID))
	must(t, "DeleteKey 1 again", d.DeleteKey(ctx, user, key1.ID))
	waitFor(ctx, t, "key 1 is rejected", func() error {
		if err := c1.PutObject(ctx, rw, "k1", []byte("1")); err == nil {
			return fmt.Errorf("key 1 still writes")
		}
		return nil
	})
	must(t, "key 2 still works", c2.PutObject(ctx, rw, "k2", []byte("2")))
	iamTable.Set(t, srv.Kind, rowRevoke, "yes")
	keys, err = d.ListKeys(ctx, user)
	must(t, "ListKeys", err)
	if len(keys) != 1 || keys[0].ID != key2.ID {
		t.Errorf("ListKeys after delete = %+v, want only %s", keys, key2.ID)
	}

	// Teardown leaves nothing, and repeating it is success.
	must(t, "DeleteUser", d.DeleteUser(ctx, user))
	must(t, "DeleteUser again", d.DeleteUser(ctx, user))
	waitFor(ctx, t, "key 2 is rejected", func() error {
		if err := c2.PutObject(ctx, rw, "k2", []byte("2")); err == nil {
			return fmt.Errorf("key 2 still writes")
		}
		return nil
	})
	// Narrowing a user that is gone is success, and creates nothing.
	if err := d.DeletePolicy(ctx, user); err != nil {
		t.Errorf("DeletePolicy of a deleted user: %v, want success", err)
	}
	if err := d.PutPolicy(ctx, user, grants); KindOf(err) != KindNoSuchEntity {
		t.Errorf("PutPolicy of a deleted user: %v, want NoSuchEntity", err)
	}
	names, err := ListUserNames(ctx, d)
	must(t, "ListUsers", err)
	if slices.Contains(names, user) {
		t.Errorf("user %s still listed: %v", user, names)
	}
	// Versity and RGW answer NoSuchEntity like AWS; SeaweedFS an empty list.
	keys, err = d.ListKeys(ctx, user)
	if len(keys) > 0 || (err != nil && KindOf(err) != KindNoSuchEntity) {
		t.Errorf("ListKeys of a deleted user: %v, %v; want no keys or NoSuchEntity", keys, err)
	}
	iamTable.Set(t, srv.Kind, rowDeletedUser, errorCell(err, "an empty list"))
}

// TestContractListUsersPages: ListUsers pages (or answers in one page where a
// server ignores MaxItems) and the pages together list every user exactly once, as
// the access collector needs. RGW marks the page holding the last user truncated
// still, so a last, empty page follows (4 pages for 3 users). MinIO answers every
// user at once, and the driver pages them.
func TestContractListUsersPages(t *testing.T) {
	kinds := iamKinds
	t.Cleanup(func() { // after the subtests, and after TestContract and TestContractRolesMoto
		iamTable.Check(t, kinds)
		keylessTable.Check(t, keylessKinds)
	})
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			srv := testenv.NewS3(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d := newDriver(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
			var made []string
			for range 3 {
				user := UserName("contract", randomHex(16))
				t.Cleanup(func() { _ = d.DeleteUser(context.Background(), user) })
				must(t, "EnsureUser", d.EnsureUser(ctx, user))
				made = append(made, user)
			}
			seen := map[string]int{}
			marker, pages := "", 0
			var sizes []int
			for {
				page, err := d.ListUsers(ctx, marker, 1)
				must(t, "ListUsers", err)
				pages++
				sizes = append(sizes, len(page.Names))
				for _, n := range page.Names {
					seen[n]++
				}
				if page.Next == "" || pages > 100 {
					break
				}
				marker = page.Next
			}
			t.Logf("%d pages for %d users, of %v users each", pages, len(seen), sizes)
			cell := pagesCell(sizes)
			if kind == testenv.MinIO {
				cell = minioPagesCell
			}
			iamTable.Set(t, kind, rowPages, cell)
			for _, u := range made {
				if seen[u] != 1 {
					t.Errorf("user %s listed %d times over %d pages", u, seen[u], pages)
				}
			}
		})
	}
}

// TestContractErrors pins the classification of the failures the controller
// acts on, and that no error carries a secret.
func TestContractErrors(t *testing.T) {
	srv := testenv.NewS3(t, testenv.SeaweedFS)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	wrong := "Wrong" + srv.SecretAccessKey[5:]
	err := newDriver(t, srv, srv.AccessKeyID, wrong).Check(ctx)
	if k := KindOf(err); k != KindInvalidCredentials && k != KindAccessDenied {
		t.Errorf("Check with a wrong secret: %v, want InvalidCredentials or AccessDenied", err)
	}
	if err != nil && strings.Contains(err.Error(), wrong) {
		t.Errorf("error carries the secret")
	}

	addr, err := testenv.FreeAddr()
	must(t, "FreeAddr", err)
	closed, err := New(ctx, Config{Endpoint: "http://" + addr, AccessKeyID: "AK", SecretAccessKey: "SK", Timeout: 5 * time.Second})
	must(t, "New", err)
	if err := closed.Check(ctx); KindOf(err) != KindUnreachable {
		t.Errorf("Check of a closed port: %v, want Unreachable", err)
	}

	d := newDriver(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
	if err := d.EnsureUser(ctx, "not valid/"); KindOf(err) != KindInvalid {
		t.Errorf("EnsureUser of an invalid name: %v, want Invalid", err)
	}
	if err := d.PutPolicy(ctx, "bk-x", []Grant{{Bucket: "b", Mode: "Everything"}}); KindOf(err) != KindInvalid {
		t.Errorf("PutPolicy with an unknown mode: %v, want Invalid", err)
	}
}

// testOtherAccount proves another account's root neither lists our users nor
// revokes their keys (RGW answers NoSuchEntity there: in its account the user does
// not exist), and that a key outside any account gets no IAM at all (RGW: 405
// MethodNotAllowed, classified NotImplemented).
func testOtherAccount(ctx context.Context, t *testing.T, srv *testenv.S3Server, user, keyID string, keyWorks func() error) {
	t.Helper()
	other := newDriver(t, srv, srv.OtherAccessKeyID, srv.OtherSecretAccessKey)
	names, err := ListUserNames(ctx, other)
	must(t, "other account ListUsers", err)
	if slices.Contains(names, user) {
		t.Errorf("the other account lists our user %s", user)
	}
	if _, err := other.ListKeys(ctx, user); KindOf(err) != KindNoSuchEntity {
		t.Errorf("other account ListAccessKeys of our user: %v, want NoSuchEntity", err)
	}
	if err := other.DeleteKey(ctx, user, keyID); err != nil {
		t.Errorf("other account DeleteAccessKey of our user's key: %v, want NoSuchEntity (nil)", err)
	}
	must(t, "the key works after the other account's DeleteAccessKey", keyWorks())
	if srv.AdminOpsAccessKeyID != "" {
		err := newDriver(t, srv, srv.AdminOpsAccessKeyID, srv.AdminOpsSecretAccessKey).Check(ctx)
		if KindOf(err) != KindNotImplemented {
			t.Errorf("IAM Check by a user outside any account: %v, want NotImplemented", err)
		}
	}
}

func newDriver(t *testing.T, srv *testenv.S3Server, access, secret string) Driver {
	t.Helper()
	cfg := Config{Endpoint: srv.IAMEndpoint, Region: srv.IAMRegion, AccessKeyID: access, SecretAccessKey: secret,
		APIOptions: []func(*middleware.Stack) error{contractRequests.Middleware}}
	if srv.Kind == testenv.MinIO {
		// MinIO's admin API on its S3 port; its requests are no AWS IAM actions.
		cfg = Config{API: APIMinIO, Endpoint: srv.Endpoint, Region: srv.Region, AccessKeyID: access, SecretAccessKey: secret,
			Timeout: minioTestTimeout}
	}
	d, err := New(context.Background(), cfg)
	must(t, "New", err)
	return d
}

func s3Client(t *testing.T, srv *testenv.S3Server, access, secret string) s3.Client {
	t.Helper()
	c, err := s3.New(context.Background(), s3.Config{
		Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: access, SecretAccessKey: secret, RequestTimeout: 10 * time.Second,
	})
	must(t, "s3.New", err)
	return c
}

// bucket creates a fresh bucket as the admin and removes it (emptied) at the end.
func bucket(ctx context.Context, t *testing.T, admin s3.Client) string {
	t.Helper()
	name := "bk-iam-" + randomHex(6)
	must(t, "CreateBucket "+name, admin.CreateBucket(ctx, name, ""))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		page, err := admin.ListObjectVersions(ctx, name, nil)
		if err == nil {
			var ids []s3.ObjectID
			for _, v := range page.Versions {
				ids = append(ids, s3.ObjectID{Key: v.Key, VersionID: v.VersionID})
			}
			_ = admin.DeleteObjects(ctx, name, ids)
		}
		if err := admin.DeleteBucket(ctx, name); err != nil {
			t.Errorf("cleanup: delete bucket %s: %v", name, err)
		}
	})
	return name
}

// waitFor polls fn until it returns nil: new and deleted keys reach the S3 side
// of a server shortly after the IAM call answers (AWS: seconds). Bounded by ctx
// and 30s.
func waitFor(ctx context.Context, t *testing.T, what string, fn func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	for {
		err := fn()
		if err == nil {
			t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within 30s: %v", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
