package iam

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The keyless contract: on each store, the cluster's issuer registered as an OIDC
// provider, a role per access trusting one ServiceAccount's tokens for one audience,
// and what a session of that role may do. Only RGW checks tokens here end to end:
// moto checks no token nor trust policy (the shape only: provider, role, the
// permission policy it enforces on a session), Versity fetches no key set from a
// loopback address, and SeaweedFS keeps no inline role policies.

// TestContractRolesMoto runs the keyless contract on moto, the AWS stand-in (the
// other stores run it after their key contract, on the same server: TestContract).
func TestContractRolesMoto(t *testing.T) {
	srv := testenv.NewS3(t, testenv.Moto)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runRolesContract(ctx, t, srv)
}

// audience is what the stores' providers list and the tokens are for.
const audience = "bucketkeeper-contract"

func runRolesContract(ctx context.Context, t *testing.T, srv *testenv.S3Server) {
	env := sharedKeyless(t)
	row := func(r, cell string) { keylessTable.Set(t, srv.Kind, r, cell) }
	notReached := func(why string, rows ...string) {
		for _, r := range rows {
			row(r, why)
		}
	}
	if srv.Kind == testenv.RGW || srv.Kind == testenv.Versity {
		must(t, "TrustIssuer", srv.TrustIssuer(env.issuer))
	}
	d := newDriver(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
	roles, ok := RolesOf(d)
	if !ok {
		t.Fatal("the SDK driver has no role operations")
	}
	admin := s3Client(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
	rw, other, ro := bucket(ctx, t, admin), bucket(ctx, t, admin), bucket(ctx, t, admin)
	must(t, "admin PutObject ro", admin.PutObject(ctx, ro, "seed", []byte("seed")))

	// The provider, registered first with a wrong thumbprint (the wrong-thumbprint
	// case below), then again with the right one: an update of the existing one.
	wrongThumbprint := strings.Repeat("0", 40)
	provider := OIDCProvider{URL: env.issuer.URL, Audiences: []string{audience}, Thumbprints: []string{wrongThumbprint}}
	providerARN, err := roles.EnsureOIDCProvider(ctx, provider)
	row(rowProvider, errorCell(err, "yes"))
	if err != nil {
		t.Logf("CreateOpenIDConnectProvider: %v", err)
		notReached("not reached", rowRole, rowTrustReadBack, rowAssume, rowSessionScope, rowOtherToken, rowThumbprint, rowNarrowSession, rowDeletedRole, rowRolePages)
		return
	}
	t.Cleanup(func() { _ = roles.DeleteOIDCProvider(context.Background(), providerARN) })
	if !strings.Contains(providerARN, ":oidc-provider/"+ConditionKeyPrefix(env.issuer.URL)) {
		t.Errorf("provider ARN %s does not name the issuer", providerARN)
	}

	// The role: CheckRoles says beforehand whether the store keeps inline role
	// policies, as the ObjectStore's check does.
	checkErr := roles.CheckRoles(ctx, "contract")
	role := Role{Name: UserName("contract", randomHex(16)), ProviderARN: providerARN, Issuer: env.issuer.URL,
		Subject: ServiceAccountSubject(keylessNamespace, "app"), Audience: audience, MaxSessionDuration: time.Hour}
	t.Cleanup(func() { _ = roles.DeleteRole(context.Background(), role.Name) })
	roleARN, err := roles.EnsureRole(ctx, role)
	if err == nil {
		var again string
		again, err = roles.EnsureRole(ctx, role)
		if err == nil && again != roleARN {
			t.Errorf("EnsureRole again: ARN %s, first %s", again, roleARN)
		}
	}
	grants := []Grant{{Bucket: rw, Mode: ReadWrite}, {Bucket: ro, Mode: ReadOnly}}
	if err == nil {
		err = roles.PutRolePolicy(ctx, role.Name, grants)
	}
	if (checkErr == nil) != (err == nil) || (err != nil && KindOf(err) != KindOf(checkErr)) {
		t.Errorf("CheckRoles said %v, the role's calls %v", checkErr, err)
	}
	row(rowRole, roleCell(err))
	if err != nil {
		t.Logf("the role: %v", err)
		must(t, "DeleteRole of a role without its policy", roles.DeleteRole(ctx, role.Name))
		notReached("not reached: no role", rowTrustReadBack, rowAssume, rowSessionScope, rowOtherToken, rowThumbprint, rowNarrowSession, rowDeletedRole, rowRolePages)
		return
	}
	row(rowTrustReadBack, trustReadBack(ctx, t, srv, role))

	// The session: the STS endpoint is the IAM one on every store here (Versity's is
	// its IAM service).
	assume := func(token string) (s3.Client, error) {
		return assumeRole(ctx, t, srv, roleARN, token)
	}
	good := env.token(ctx, t, "app", audience)
	if srv.Kind == testenv.RGW {
		// A wrong thumbprint refuses even the right token; the right one (an update
		// of the provider) admits it.
		_, err := assume(good)
		row(rowThumbprint, refusedCell(err))
		if stsCode(err) != "AccessDenied" {
			t.Errorf("AssumeRoleWithWebIdentity with a wrong thumbprint registered: %v, want AccessDenied", err)
		}
	} else {
		row(rowThumbprint, map[testenv.S3Kind]string{testenv.Moto: "not checked: moto checks no token",
			testenv.Versity: "not reached: no token is checked here (see AssumeRoleWithWebIdentity)"}[srv.Kind])
	}
	provider.Thumbprints = []string{env.issuer.Thumbprint}
	if again, err := roles.EnsureOIDCProvider(ctx, provider); err != nil || again != providerARN {
		t.Fatalf("EnsureOIDCProvider of the existing provider: %s, %v", again, err)
	}
	served := env.issuer.Served()
	session, err := assume(good)
	switch {
	case err == nil && srv.Kind == testenv.Moto:
		row(rowAssume, "yes (moto checks no token)")
	case err == nil:
		row(rowAssume, "yes")
		if env.issuer.Served() == served {
			t.Errorf("a session was granted without the issuer's key set being fetched")
		}
	case srv.Kind == testenv.Versity:
		t.Logf("Versity's AssumeRoleWithWebIdentity: %v", err)
		// Its IAM service resolves the issuer and trusts its CA (TrustIssuer), but
		// fetches nothing from a loopback address, where the issuer is here.
		row(rowAssume, fmt.Sprintf("refused here (`%s`): Versity fetches no key set from a loopback or private address", stsCode(err)))
		notReached("not reached", rowSessionScope, rowOtherToken, rowNarrowSession)
		testRoleRevocation(ctx, t, roleCase{kind: srv.Kind, roles: roles, role: role, rw: rw, grants: grants, assume: assume, token: good})
		row(rowRolePages, rolePages(ctx, t, roles))
		return
	default:
		t.Fatalf("AssumeRoleWithWebIdentity: %v", err)
	}

	// What the session may do is the key's grant: its buckets, their modes.
	waitFor(ctx, t, "the session writes its bucket", func() error { return session.PutObject(ctx, rw, "app/obj", []byte("hi")) })
	deniedS3 := func(what string, err error) {
		t.Helper()
		if s3.KindOf(err) != s3.KindAccessDenied {
			t.Errorf("%s: %v, want AccessDenied", what, err)
		}
	}
	deniedS3("session PutObject other bucket", session.PutObject(ctx, other, "x", []byte("x")))
	deniedS3("session PutObject read-only bucket", session.PutObject(ctx, ro, "x", []byte("x")))
	deniedS3("session CreateBucket", session.CreateBucket(ctx, "bk-"+randomHex(8), ""))
	if body, err := session.GetObject(ctx, ro, "seed", 100); err != nil || string(body) != "seed" {
		t.Errorf("session GetObject read-only bucket: %q, %v", body, err)
	}
	row(rowSessionScope, "yes")

	// Another ServiceAccount's token, or one for another audience, is refused.
	if srv.Kind == testenv.RGW {
		_, errSub := assume(env.token(ctx, t, "other-app", audience))
		_, errAud := assume(env.token(ctx, t, "app", "another-audience"))
		if stsCode(errSub) != "AccessDenied" || stsCode(errAud) != "AccessDenied" {
			t.Errorf("another ServiceAccount: %v; another audience: %v; want AccessDenied for both", errSub, errAud)
		}
		row(rowOtherToken, refusedCell(errSub))
	} else {
		row(rowOtherToken, "not checked: moto checks no trust policy")
	}

	testRoleRevocation(ctx, t, roleCase{kind: srv.Kind, roles: roles, role: role, rw: rw, grants: grants, session: session, assume: assume, token: good})
	row(rowRolePages, rolePages(ctx, t, roles))
}

// roleCase is what testRoleRevocation needs of a store's case.
type roleCase struct {
	kind   testenv.S3Kind
	roles  Roles
	role   Role
	rw     string  // the role's read-write bucket
	grants []Grant // its policy
	// session is a session of the role, nil where none could be had.
	session s3.Client
	assume  func(string) (s3.Client, error)
	token   string
}

// testRoleRevocation: without its policy the role's session reaches nothing, and with
// it back it does again; after DeleteRole, what an issued session and a new
// AssumeRoleWithWebIdentity get.
func testRoleRevocation(ctx context.Context, t *testing.T, c roleCase) {
	t.Helper()
	if c.session != nil {
		must(t, "DeleteRolePolicy", c.roles.DeleteRolePolicy(ctx, c.role.Name))
		must(t, "DeleteRolePolicy again", c.roles.DeleteRolePolicy(ctx, c.role.Name))
		err := c.session.PutObject(ctx, c.rw, "narrowed", []byte("x"))
		keylessTable.Set(t, c.kind, rowNarrowSession, map[bool]string{true: "refused at once", false: "still writes"}[s3.KindOf(err) == s3.KindAccessDenied])
		must(t, "PutRolePolicy back", c.roles.PutRolePolicy(ctx, c.role.Name, c.grants))
		waitFor(ctx, t, "the session writes again with the policy back", func() error { return c.session.PutObject(ctx, c.rw, "back", []byte("x")) })
	}
	must(t, "DeleteRole", c.roles.DeleteRole(ctx, c.role.Name))
	must(t, "DeleteRole again", c.roles.DeleteRole(ctx, c.role.Name))
	names, err := ListRoleNames(ctx, c.roles)
	must(t, "ListRoles", err)
	if slices.Contains(names, c.role.Name) {
		t.Errorf("role %s still listed after DeleteRole", c.role.Name)
	}
	issued := "no session to try"
	if c.session != nil {
		err := c.session.PutObject(ctx, c.rw, "after-delete", []byte("x"))
		issued = map[bool]string{true: "its sessions refused at once", false: "its sessions work until they expire"}[s3.KindOf(err) == s3.KindAccessDenied]
	}
	_, err = c.assume(c.token)
	fresh := "a new one refused"
	switch {
	case err == nil:
		fresh = "a new one still granted (moto checks no role)"
		if c.kind != testenv.Moto {
			t.Errorf("AssumeRoleWithWebIdentity of a deleted role was granted")
		}
	case c.kind == testenv.RGW && stsCode(err) != "AccessDenied":
		t.Errorf("AssumeRoleWithWebIdentity of a deleted role: %v, want AccessDenied", err)
	}
	keylessTable.Set(t, c.kind, rowDeletedRole, issued+"; "+fresh)
}

// rolePages makes three roles and lists them a page of one at a time, as the access
// collector pages, and says how the store paged.
func rolePages(ctx context.Context, t *testing.T, roles Roles) string {
	t.Helper()
	env := sharedKeyless(t)
	made, before := map[string]bool{}, time.Now().Add(-time.Minute)
	for range 3 {
		r := Role{Name: UserName("contract", randomHex(16)), ProviderARN: "arn:aws:iam::000000000000:oidc-provider/" + ConditionKeyPrefix(env.issuer.URL),
			Issuer: env.issuer.URL, Subject: ServiceAccountSubject(keylessNamespace, "nobody"), Audience: audience, MaxSessionDuration: time.Hour}
		t.Cleanup(func() { _ = roles.DeleteRole(context.Background(), r.Name) })
		_, err := roles.EnsureRole(ctx, r)
		must(t, "EnsureRole", err)
		made[r.Name] = true
	}
	seen := map[string]int{}
	marker, pages := "", 0
	var sizes []int
	for {
		page, err := roles.ListRoles(ctx, marker, 1)
		must(t, "ListRoles", err)
		pages++
		sizes = append(sizes, len(page.Roles))
		for _, r := range page.Roles {
			seen[r.Name]++
			if r.ARN == "" {
				t.Errorf("role %s listed without its ARN", r.Name)
			}
			// The access collector keeps a role made moments ago for an access being
			// issued through another store of the account: it needs the date.
			if made[r.Name] && (r.Created.Before(before) || r.Created.After(time.Now().Add(time.Minute))) {
				t.Errorf("role %s listed as made %v, not just now", r.Name, r.Created)
			}
		}
		if page.Next == "" || pages > 100 {
			break
		}
		marker = page.Next
	}
	for name := range made {
		if seen[name] != 1 {
			t.Errorf("role %s listed %d times over %d pages", name, seen[name], pages)
		}
	}
	return pagesCell(sizes)
}

// trustReadBack reads the role back (GetRole, as the operator does on a role that
// exists) and compares its trust policy with the one written.
func trustReadBack(ctx context.Context, t *testing.T, srv *testenv.S3Server, role Role) string {
	t.Helper()
	raw := awsiam.New(awsiam.Options{Region: srv.IAMRegion, BaseEndpoint: aws.String(srv.IAMEndpoint),
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKeyID, srv.SecretAccessKey, "")})
	out, err := raw.GetRole(ctx, &awsiam.GetRoleInput{RoleName: aws.String(role.Name)})
	if err != nil {
		t.Errorf("GetRole: %v", err)
		return "FAILED"
	}
	want, _ := TrustPolicyDocument(role)
	got := decodePolicy(aws.ToString(out.Role.AssumeRolePolicyDocument))
	same, err := s3.EquivalentPolicies(got, want)
	if err != nil || !same {
		t.Errorf("the trust policy read back %s, written %s (%v)", got, want, err)
		return "differs"
	}
	if d := aws.ToInt32(out.Role.MaxSessionDuration); d != int32(role.MaxSessionDuration.Seconds()) {
		return fmt.Sprintf("the same; MaxSessionDuration %d, not %d", d, int32(role.MaxSessionDuration.Seconds()))
	}
	return "the same, and MaxSessionDuration"
}

// assumeRole calls AssumeRoleWithWebIdentity unsigned, as an SDK's default chain does,
// on the store's IAM endpoint, and returns an S3 client holding the session.
func assumeRole(ctx context.Context, t *testing.T, srv *testenv.S3Server, roleARN, token string) (s3.Client, error) {
	t.Helper()
	c := sts.New(sts.Options{Region: srv.IAMRegion, BaseEndpoint: aws.String(srv.IAMEndpoint), Credentials: aws.AnonymousCredentials{}})
	out, err := c.AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{
		RoleArn: aws.String(roleARN), RoleSessionName: aws.String("contract"), WebIdentityToken: aws.String(token),
	})
	if err != nil {
		return nil, err
	}
	cr := out.Credentials
	if cr == nil || aws.ToString(cr.SessionToken) == "" {
		t.Fatalf("AssumeRoleWithWebIdentity answered without a session")
	}
	if left := time.Until(aws.ToTime(cr.Expiration)); left > time.Hour+time.Minute {
		t.Errorf("a session of %s, longer than the role's hour", left.Round(time.Second))
	}
	client, err := s3.New(ctx, s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: aws.ToString(cr.AccessKeyId), SecretAccessKey: aws.ToString(cr.SecretAccessKey), SessionToken: aws.ToString(cr.SessionToken),
		RequestTimeout: 10 * time.Second})
	must(t, "s3.New", err)
	return client, nil
}

// stsCode is the error code of a refused STS call ("" for success or none).
func stsCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// roleCell says whether the role and its policy were made, or which call the store
// refused and what the operator reports for it.
func roleCell(err error) string {
	var e *Error
	if err == nil {
		return "yes"
	}
	if errors.As(err, &e) && e.Kind == KindNotImplemented {
		return fmt.Sprintf("no: %s answers `%s` (NotSupportedByStore)", e.Op, e.Code)
	}
	return errorCell(err, "yes")
}

func refusedCell(err error) string {
	if err == nil {
		return "admitted"
	}
	return fmt.Sprintf("refused (`%s`)", stsCode(err))
}
