package iam

import (
	"errors"
	"fmt"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// docs/stores.md's IAM store table (testenv.StoreTable): what a per-access key is and may
// do on each store, as the contract tests observed it. TestContractListUsersPages,
// which runs after TestContract, checks it once both have run on every store.

var iamRows = []string{
	rowIssue, rowScope, rowReadOnly, rowKeyLimit, rowRevoke, rowOtherAccount, rowDeletedUser, rowPages,
}

const (
	rowIssue        = "A user, a policy on its buckets and a key per BucketAccess"
	rowScope        = "The key reaches no other bucket, creates none, may not set its bucket's policy nor delete it"
	rowReadOnly     = "A ReadOnly grant reads and may not write or delete"
	rowKeyLimit     = "A third key for one user (rotation holds two)"
	rowRevoke       = "A deleted key is refused; the user's other key keeps working"
	rowOtherAccount = "Another account can neither list our users nor revoke their keys"
	rowDeletedUser  = "ListAccessKeys of a deleted user"
	rowPages        = "ListUsers with MaxItems 1 (the collector's paging)"
)

// iamTable is what the contract tests observed.
var iamTable = testenv.NewStoreTable("iam", "internal/iam's contract tests", iamRows...)

// errorCell is how a cell reads an IAM answer: "yes" for success, else its code.
func errorCell(err error, yes string) string {
	var e *Error
	switch {
	case err == nil:
		return yes
	case errors.As(err, &e) && e.Code != "":
		return fmt.Sprintf("`%s`", e.Code)
	default:
		return KindOf(err).String()
	}
}

// otherAccountCell says why the other-account row is or is not tested on a store.
var otherAccountCell = map[testenv.S3Kind]string{
	testenv.SeaweedFS: "not tested: its second identity is a gateway admin, no IAM account",
	testenv.Versity:   "not tested: its second identity is an IAM user of the same account",
	testenv.RGW:       "yes (separate IAM accounts)",
	testenv.MinIO:     "not tested: its second identity is a session of the root user",
}

// minioPagesCell: MinIO answers every user at once; the driver pages them.
const minioPagesCell = "one answer with every user, paged by the operator"

// pagesCell describes how ListUsers paged, from the page sizes seen.
func pagesCell(sizes []int) string {
	switch {
	case len(sizes) == 1:
		return "one page: MaxItems ignored"
	case sizes[len(sizes)-1] == 0:
		return "paged by MaxItems, then an empty last page"
	default:
		return "paged by MaxItems"
	}
}

// docs/stores.md's keyless store table: what a role per access is and may do on each
// store, as the keyless contract observed it (contract_roles_test.go). moto stands in
// for AWS's shape; it checks no token and no trust policy.
var keylessRows = []string{
	rowProvider, rowRole, rowTrustReadBack, rowAssume, rowSessionScope, rowOtherToken, rowThumbprint, rowNarrowSession, rowDeletedRole, rowRolePages,
}

const (
	rowProvider      = "The cluster's issuer registered as an OIDC provider (CreateOpenIDConnectProvider; again: updated)"
	rowRole          = "A role trusting one ServiceAccount and audience, with an inline policy on its buckets (CreateRole, PutRolePolicy)"
	rowTrustReadBack = "The role read back (GetRole): its trust policy"
	rowAssume        = "AssumeRoleWithWebIdentity with the ServiceAccount's token"
	rowSessionScope  = "The session reaches its bucket and no other, and a ReadOnly grant cannot write"
	rowOtherToken    = "Another ServiceAccount's token, or one for another audience"
	rowThumbprint    = "The right token while the provider lists a wrong thumbprint"
	rowNarrowSession = "An issued session once the role's policy is deleted"
	rowDeletedRole   = "After DeleteRole"
	rowRolePages     = "ListRoles with MaxItems 1 (the collector's paging)"
)

// keylessTable is what the keyless contract observed.
var keylessTable = testenv.NewStoreTable("keyless", "internal/iam's keyless contract tests", keylessRows...)

// keylessKinds are the keyless table's columns.
var keylessKinds = []testenv.S3Kind{testenv.SeaweedFS, testenv.Versity, testenv.RGW, testenv.Moto}
