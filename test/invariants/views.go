package invariants

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"

	"github.com/bucketkeeper/bucketkeeper/internal/iam"
)

// IAMReader is the read side of a store's IAM API, as the store's admin sees it. The
// operator's iam.Driver has no call to read a policy back (it only writes them), so the
// checker has its own.
type IAMReader interface {
	// Users lists every user name, all pages.
	Users(ctx context.Context) ([]string, error)
	// Keys lists the IDs of the user's access keys; ErrNoSuchUser if it is gone.
	Keys(ctx context.Context, user string) ([]string, error)
	// Policies returns the user's inline policies by name; ErrNoSuchUser if it is gone.
	Policies(ctx context.Context, user string) (map[string]string, error)
}

// RoleReader is the read side of a store's IAM roles, which an IAMReader may have too:
// the operator makes a role per keyless BucketAccess.
type RoleReader interface {
	// Roles lists every role name, all pages; ErrNoRoles where the store has no roles.
	Roles(ctx context.Context) ([]string, error)
}

// ErrNoRoles: the store's IAM has no roles (it answers ListRoles NotImplemented).
var ErrNoRoles = errors.New("the store's IAM has no roles")

// ErrNoSuchUser: the user was deleted since it was listed.
var ErrNoSuchUser = errors.New("no such IAM user")

// callTimeout bounds every call of the SDK reader.
const callTimeout = 20 * time.Second

// SDKIAM reads an IAM endpoint through the AWS SDK client c (the store admin's).
type SDKIAM struct{ Client *awsiam.Client }

var (
	_ IAMReader  = SDKIAM{}
	_ RoleReader = SDKIAM{}
)

func (r SDKIAM) Users(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var names []string
	// By hand rather than with the SDK's paginator, which trusts IsTruncated: a server
	// that says truncated with the same marker would be asked forever.
	marker := ""
	for {
		in := &awsiam.ListUsersInput{MaxItems: aws.Int32(1000)}
		if marker != "" {
			in.Marker = aws.String(marker)
		}
		out, err := r.Client.ListUsers(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, u := range out.Users {
			names = append(names, aws.ToString(u.UserName))
		}
		next := aws.ToString(out.Marker)
		if !out.IsTruncated || next == "" || next == marker {
			return names, nil
		}
		marker = next
	}
}

// Roles lists every role name, by hand as Users does.
func (r SDKIAM) Roles(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var names []string
	marker := ""
	for {
		in := &awsiam.ListRolesInput{MaxItems: aws.Int32(1000)}
		if marker != "" {
			in.Marker = aws.String(marker)
		}
		out, err := r.Client.ListRoles(ctx, in)
		if err != nil {
			if notImplemented(err) {
				return nil, ErrNoRoles
			}
			return nil, err
		}
		for _, role := range out.Roles {
			names = append(names, aws.ToString(role.RoleName))
		}
		next := aws.ToString(out.Marker)
		if !out.IsTruncated || next == "" || next == marker {
			return names, nil
		}
		marker = next
	}
}

func (r SDKIAM) Keys(ctx context.Context, user string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := r.Client.ListAccessKeys(ctx, &awsiam.ListAccessKeysInput{UserName: aws.String(user)})
	if err != nil {
		return nil, noSuchUser(err)
	}
	var ids []string
	for _, k := range out.AccessKeyMetadata {
		ids = append(ids, aws.ToString(k.AccessKeyId))
	}
	return ids, nil
}

// Policies lists the user's inline policies and reads each. A server that cannot list
// them (NotImplemented) is asked for the operator's one policy (iam.PolicyName) by name.
func (r SDKIAM) Policies(ctx context.Context, user string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	names := []string{iam.PolicyName}
	listed, err := r.Client.ListUserPolicies(ctx, &awsiam.ListUserPoliciesInput{UserName: aws.String(user)})
	switch {
	case err == nil:
		names = listed.PolicyNames
	case notImplemented(err):
	default:
		return nil, noSuchUser(err)
	}
	out := map[string]string{}
	for _, name := range names {
		got, err := r.Client.GetUserPolicy(ctx, &awsiam.GetUserPolicyInput{UserName: aws.String(user), PolicyName: aws.String(name)})
		if err != nil {
			if isNoSuchEntity(err) {
				if _, kerr := r.Keys(ctx, user); errors.Is(kerr, ErrNoSuchUser) {
					return nil, ErrNoSuchUser
				}
				continue // the user is there, without this policy
			}
			return nil, err
		}
		out[name] = aws.ToString(got.PolicyDocument)
	}
	return out, nil
}

func noSuchUser(err error) error {
	if isNoSuchEntity(err) {
		return ErrNoSuchUser
	}
	return err
}

func isNoSuchEntity(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) && (api.ErrorCode() == "NoSuchEntity" || api.ErrorCode() == "NoSuchEntityException") {
		return true
	}
	return statusOf(err) == http.StatusNotFound
}

func notImplemented(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) && (api.ErrorCode() == "NotImplemented" || api.ErrorCode() == "InvalidAction") {
		return true
	}
	s := statusOf(err)
	return s == http.StatusNotImplemented || s == http.StatusMethodNotAllowed
}

func statusOf(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
