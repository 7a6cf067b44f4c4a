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
}

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
