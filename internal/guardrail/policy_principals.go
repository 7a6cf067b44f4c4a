package guardrail

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Which principals of an Allow count as one specific identity, and so not public, is an
// allow-list of shapes, not a list of the public ones: stores read principals each their
// own way, and a shape the check did not know to be public was public somewhere. Ceph
// RGW authorizes an anonymous request as its user "anonymous" of the empty tenant, so
// arn:aws:iam:::user/anonymous and arn:aws:iam:::root (the whole empty tenant) grant
// anyone on the network, and RGW's own public-access block, which knows only "*", lets
// them through. A principal counts as specific only when it is of type AWS and one of:
//
//   - arn:aws:iam::<account>:root, arn:aws:iam::<account>:user/<path/name> or
//     arn:aws:iam::<account>:role/<path/name>, with a non-empty account;
//   - a bare account ID: AWS's 12 digits, or RGW's "RGW" and 17 digits;
//   - a bare name the store admin lists among the store's accounts
//     (guardrails.policyPrincipalAccounts; an RGW tenant, say).
//
// Never specific, whatever the store: a wildcard anywhere, "anonymous" (in any case) as
// the account, a path segment or the name, an empty account, any other form, and every
// principal of another type (CanonicalUser, Federated, Service), which the guardrail
// cannot tie to one identity of the store. Those are public: refused where the store
// allows no public buckets, and on a store that does, sent for the store to read as it
// does (Versity refuses unknown principals, RGW canonical users).
//
// When the store admin lists the store's accounts, a specific principal must also be of
// one of them: on AWS an account ID is anyone's, and a tenant could otherwise hand its
// data to an account outside the organisation that outlives its keys.

var (
	// iamPrincipalARN splits an IAM principal ARN into account and resource.
	iamPrincipalARN = regexp.MustCompile(`^arn:aws:iam::([^:]*):(.*)$`)
	// principalAccount is the shape of an account in a principal: AWS's digits, an RGW
	// tenant or account ID, a SeaweedFS account ID. No ':' or '/' (RGW reads a bare
	// string without them as a tenant), no wildcard.
	principalAccount = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	// bareAccountID is an account ID as a principal of its own: AWS's or RGW's.
	bareAccountID = regexp.MustCompile(`^([0-9]{12}|RGW[0-9]{17})$`)
	// iamNameSegment is one segment of an IAM path or name (IAM's own character set).
	iamNameSegment = regexp.MustCompile(`^[A-Za-z0-9_+=,.@-]+$`)
)

// principalCheck is what a statement's principal means for the guardrails.
type principalCheck struct {
	// public says why the principal is not one specific identity; empty when it is.
	public string
	// account is the account of a specific principal.
	account string
}

// checkPrincipalID reads one principal ID of type typ.
func checkPrincipalID(typ, id string) principalCheck {
	shown := fmt.Sprintf("the principal {%q: %s}", typ, quote(id))
	if typ != "AWS" {
		return principalCheck{public: shown + ", of a type the guardrail cannot tie to one identity of the store (only AWS principals can be specific)"}
	}
	if strings.ContainsAny(id, "*?") {
		return principalCheck{public: shown + ", a wildcard"}
	}
	if bareAccountID.MatchString(id) {
		return principalCheck{account: id}
	}
	if strings.EqualFold(id, "anonymous") {
		return principalCheck{public: shown + ", which names the anonymous user"}
	}
	m := iamPrincipalARN.FindStringSubmatch(id)
	if m == nil {
		// A bare name is specific only when the store admin lists it (listedAccount).
		return principalCheck{public: shown + ", which is not a form the guardrail knows to name one identity", account: id}
	}
	account, resource := m[1], m[2]
	switch {
	case account == "":
		return principalCheck{public: shown + ", an ARN with an empty account (Ceph RGW reads it as its default tenant, anonymous requests included)"}
	case strings.EqualFold(account, "anonymous"):
		return principalCheck{public: shown + ", which names the anonymous account"}
	case !principalAccount.MatchString(account):
		return principalCheck{public: shown + ", whose account is not a plain account name or ID"}
	case resource == "root":
		return principalCheck{account: account}
	}
	kind, path, _ := strings.Cut(resource, "/")
	if kind != "user" && kind != "role" {
		return principalCheck{public: shown + ", which is not an account root, user or role ARN"}
	}
	for _, seg := range strings.Split(path, "/") {
		if strings.EqualFold(seg, "anonymous") {
			return principalCheck{public: shown + ", which names the anonymous user"}
		}
		if !iamNameSegment.MatchString(seg) {
			return principalCheck{public: shown + ", whose " + kind + " name is not a plain IAM name"}
		}
	}
	return principalCheck{account: account}
}

// publicPrincipal says why an Allow's principal is not one specific identity (empty:
// it is), and refuses a specific one of an account the store does not list. accounts
// are the store's own (none: any account).
func publicPrincipal(name string, st *statement, accounts []string) (string, error) {
	switch {
	case st.notPrincipal != nil:
		return "NotPrincipal, everyone but the principals it names", nil
	case st.principal == nil:
		return "no Principal, which a store may read as everyone", nil
	case st.principal.wildcard:
		return `the principal "*", everyone`, nil
	}
	for _, typ := range principalTypes { // in a fixed order, so the refusal is always the same
		ids := st.principal.ids[typ]
		if ids == nil {
			continue
		}
		for _, id := range ids.list {
			c := checkPrincipalID(typ, id)
			if c.public != "" && c.account != "" && slices.Contains(accounts, id) {
				c.public = "" // a bare name the store admin lists as an account
			}
			if c.public != "" {
				return c.public, nil
			}
			if len(accounts) > 0 && !slices.Contains(accounts, c.account) {
				return "", refuse("policy %s names the principal %s of account %s, which is not among the store's own accounts (its guardrails.policyPrincipalAccounts)",
					name, quote(id), quote(c.account))
			}
		}
	}
	return "", nil
}
