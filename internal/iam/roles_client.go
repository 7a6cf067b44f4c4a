package iam

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

var _ Roles = (*client)(nil)

func (c *client) EnsureOIDCProvider(ctx context.Context, p OIDCProvider) (string, error) {
	if !strings.HasPrefix(p.URL, "https://") || len(p.Audiences) == 0 || len(p.Thumbprints) == 0 {
		return "", &Error{Op: "CreateOpenIDConnectProvider", User: p.URL, Kind: KindInvalid, msg: "an https issuer, an audience and a thumbprint are needed"}
	}
	var arn string
	err := c.call(ctx, "CreateOpenIDConnectProvider", p.URL, func(ctx context.Context) error {
		out, err := c.api.CreateOpenIDConnectProvider(ctx, &awsiam.CreateOpenIDConnectProviderInput{
			Url: aws.String(p.URL), ClientIDList: p.Audiences, ThumbprintList: p.Thumbprints,
		})
		if err == nil {
			arn = aws.ToString(out.OpenIDConnectProviderArn)
		}
		return err
	})
	if KindOf(err) != KindEntityAlreadyExists {
		return arn, err
	}
	if arn, err = c.findOIDCProvider(ctx, p.URL); err != nil {
		return "", err
	}
	return arn, c.updateOIDCProvider(ctx, arn, p)
}

// findOIDCProvider returns the ARN of the provider registered for issuer: the ARN
// ends in oidc-provider/<issuer without its scheme>.
func (c *client) findOIDCProvider(ctx context.Context, issuer string) (string, error) {
	var arn string
	err := c.call(ctx, "ListOpenIDConnectProviders", issuer, func(ctx context.Context) error {
		out, err := c.api.ListOpenIDConnectProviders(ctx, &awsiam.ListOpenIDConnectProvidersInput{})
		if err != nil {
			return err
		}
		suffix := ":oidc-provider/" + ConditionKeyPrefix(issuer)
		for _, e := range out.OpenIDConnectProviderList {
			if strings.HasSuffix(aws.ToString(e.Arn), suffix) {
				arn = aws.ToString(e.Arn)
				return nil
			}
		}
		return errors.New("the provider exists, yet none is listed for its URL")
	})
	return arn, err
}

// updateOIDCProvider brings an existing provider to p's thumbprints and adds p's
// audiences it lacks.
func (c *client) updateOIDCProvider(ctx context.Context, arn string, p OIDCProvider) error {
	var have *awsiam.GetOpenIDConnectProviderOutput
	err := c.call(ctx, "GetOpenIDConnectProvider", p.URL, func(ctx context.Context) error {
		var err error
		have, err = c.api.GetOpenIDConnectProvider(ctx, &awsiam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String(arn)})
		return err
	})
	if err != nil {
		return err
	}
	if !sameSet(have.ThumbprintList, p.Thumbprints) {
		err := c.call(ctx, "UpdateOpenIDConnectProviderThumbprint", p.URL, func(ctx context.Context) error {
			_, err := c.api.UpdateOpenIDConnectProviderThumbprint(ctx, &awsiam.UpdateOpenIDConnectProviderThumbprintInput{
				OpenIDConnectProviderArn: aws.String(arn), ThumbprintList: p.Thumbprints,
			})
			return err
		})
		if err != nil {
			return err
		}
	}
	for _, aud := range p.Audiences {
		if slices.Contains(have.ClientIDList, aud) {
			continue
		}
		err := c.call(ctx, "AddClientIDToOpenIDConnectProvider", p.URL, func(ctx context.Context) error {
			_, err := c.api.AddClientIDToOpenIDConnectProvider(ctx, &awsiam.AddClientIDToOpenIDConnectProviderInput{
				OpenIDConnectProviderArn: aws.String(arn), ClientID: aws.String(aud),
			})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *client) DeleteOIDCProvider(ctx context.Context, arn string) error {
	err := c.call(ctx, "DeleteOpenIDConnectProvider", arn, func(ctx context.Context) error {
		_, err := c.api.DeleteOpenIDConnectProvider(ctx, &awsiam.DeleteOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String(arn)})
		return err
	})
	if KindOf(err) == KindNoSuchEntity {
		return nil
	}
	return err
}

func (c *client) CheckRoles(ctx context.Context, clusterID string) error {
	err := c.PutRolePolicy(ctx, probeRoleName(clusterID), []Grant{{Bucket: "bucketkeeper-probe", Mode: ReadOnly}})
	if KindOf(err) == KindNoSuchEntity {
		return nil
	}
	if err == nil {
		// Someone made a role of that name: the call proved the same.
		return c.DeleteRole(ctx, probeRoleName(clusterID))
	}
	return err
}

func (c *client) EnsureRole(ctx context.Context, r Role) (string, error) {
	if !ValidUserName(r.Name) {
		return "", &Error{Op: "CreateRole", User: r.Name, Kind: KindInvalid, msg: "not a valid IAM role name"}
	}
	trust, err := TrustPolicyDocument(r)
	if err != nil {
		return "", &Error{Op: "CreateRole", User: r.Name, Kind: KindInvalid, msg: err.Error()}
	}
	seconds := int32(r.MaxSessionDuration.Seconds())
	var arn string
	err = c.call(ctx, "CreateRole", r.Name, func(ctx context.Context) error {
		out, err := c.api.CreateRole(ctx, &awsiam.CreateRoleInput{
			RoleName: aws.String(r.Name), AssumeRolePolicyDocument: aws.String(trust), MaxSessionDuration: aws.Int32(seconds),
		})
		if err == nil {
			arn = aws.ToString(out.Role.Arn)
		}
		return err
	})
	if KindOf(err) != KindEntityAlreadyExists {
		return arn, err
	}
	// The name is derived from our own object: the role is ours, and is brought to
	// what it must be.
	var have *awsiam.GetRoleOutput
	if err := c.call(ctx, "GetRole", r.Name, func(ctx context.Context) error {
		var err error
		have, err = c.api.GetRole(ctx, &awsiam.GetRoleInput{RoleName: aws.String(r.Name)})
		return err
	}); err != nil {
		return "", err
	}
	if have.Role == nil {
		return "", &Error{Op: "GetRole", User: r.Name, Kind: KindUnknown, msg: "answer without a role"}
	}
	if same, _ := s3.EquivalentPolicies(decodePolicy(aws.ToString(have.Role.AssumeRolePolicyDocument)), trust); !same {
		if err := c.call(ctx, "UpdateAssumeRolePolicy", r.Name, func(ctx context.Context) error {
			_, err := c.api.UpdateAssumeRolePolicy(ctx, &awsiam.UpdateAssumeRolePolicyInput{RoleName: aws.String(r.Name), PolicyDocument: aws.String(trust)})
			return err
		}); err != nil {
			return "", err
		}
	}
	if aws.ToInt32(have.Role.MaxSessionDuration) != seconds {
		if err := c.call(ctx, "UpdateRole", r.Name, func(ctx context.Context) error {
			_, err := c.api.UpdateRole(ctx, &awsiam.UpdateRoleInput{RoleName: aws.String(r.Name), MaxSessionDuration: aws.Int32(seconds)})
			return err
		}); err != nil {
			return "", err
		}
	}
	return aws.ToString(have.Role.Arn), nil
}

// decodePolicy undoes the URL encoding AWS (not every store) applies to the policy
// documents GetRole returns.
func decodePolicy(doc string) string {
	if strings.HasPrefix(strings.TrimSpace(doc), "%7B") {
		if decoded, err := url.QueryUnescape(doc); err == nil {
			return decoded
		}
	}
	return doc
}

func (c *client) PutRolePolicy(ctx context.Context, role string, grants []Grant) error {
	doc, err := PolicyDocument(grants)
	if err != nil {
		return &Error{Op: "PutRolePolicy", User: role, Kind: KindInvalid, msg: err.Error()}
	}
	return c.call(ctx, "PutRolePolicy", role, func(ctx context.Context) error {
		_, err := c.api.PutRolePolicy(ctx, &awsiam.PutRolePolicyInput{
			RoleName: aws.String(role), PolicyName: aws.String(PolicyName), PolicyDocument: aws.String(doc),
		})
		return err
	})
}

func (c *client) DeleteRolePolicy(ctx context.Context, role string) error {
	err := c.call(ctx, "DeleteRolePolicy", role, func(ctx context.Context) error {
		_, err := c.api.DeleteRolePolicy(ctx, &awsiam.DeleteRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(PolicyName)})
		return err
	})
	if KindOf(err) == KindNoSuchEntity {
		return nil
	}
	return err
}

func (c *client) DeleteRole(ctx context.Context, role string) error {
	// A role keeps its inline policies until they are deleted (DeleteConflict). A
	// store without inline role policies (SeaweedFS) has none to delete.
	if err := c.DeleteRolePolicy(ctx, role); err != nil && KindOf(err) != KindNotImplemented {
		return err
	}
	err := c.call(ctx, "DeleteRole", role, func(ctx context.Context) error {
		_, err := c.api.DeleteRole(ctx, &awsiam.DeleteRoleInput{RoleName: aws.String(role)})
		return err
	})
	if KindOf(err) == KindNoSuchEntity {
		return nil
	}
	return err
}

func (c *client) ListRoles(ctx context.Context, marker string, limit int) (RolePage, error) {
	var page RolePage
	err := c.call(ctx, "ListRoles", "", func(ctx context.Context) error {
		in := &awsiam.ListRolesInput{MaxItems: aws.Int32(int32(min(max(limit, 1), 1000)))}
		if marker != "" {
			in.Marker = aws.String(marker)
		}
		out, err := c.api.ListRoles(ctx, in)
		if err != nil {
			return err
		}
		page = RolePage{}
		for _, r := range out.Roles {
			page.Roles = append(page.Roles, RoleRef{Name: aws.ToString(r.RoleName), ARN: aws.ToString(r.Arn), Created: aws.ToTime(r.CreateDate)})
		}
		// As ListUsers: a truncated answer without a new marker is the last page.
		if out.IsTruncated && aws.ToString(out.Marker) != "" && aws.ToString(out.Marker) != marker {
			page.Next = aws.ToString(out.Marker)
		}
		return nil
	})
	return page, err
}

// ListRoleNames lists every role name (all pages). The operator does not need it;
// tests use it to prove a teardown left nothing behind.
func ListRoleNames(ctx context.Context, r Roles) ([]string, error) {
	var names []string
	marker := ""
	for {
		page, err := r.ListRoles(ctx, marker, 1000)
		if err != nil {
			return nil, err
		}
		for _, role := range page.Roles {
			names = append(names, role.Name)
		}
		if page.Next == "" {
			return names, nil
		}
		marker = page.Next
	}
}

func sameSet(a, b []string) bool {
	norm := func(s []string) []string {
		out := make([]string, 0, len(s))
		for _, v := range s {
			out = append(out, strings.ToLower(v))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}
