package s3

import (
	"errors"
	"fmt"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// docs/stores.md's S3 store table (testenv.StoreTable): each contract case records its
// row's cell for its store, and TestContract checks the table once every store has
// run every case.

// tableRows are the table's rows, in order.
var tableRows = []string{
	rowCreate, rowCreateOwnAgain, rowCreateOthers, rowOwners, rowTags, rowMissingTags, rowVersioning,
	rowLifecycle, rowPublicAccessBlock, rowPolicy, rowCORS, rowVersions, rowUploads, rowHealth,
	rowHealthBadKeys, rowOutage,
}

const (
	rowCreate            = "Create a bucket"
	rowCreateOwnAgain    = "Create it again (its owner)"
	rowCreateOthers      = "Create another identity's bucket"
	rowOwners            = "Adoption compares the ACL owner with"
	rowTags              = "Bucket tags (ownership)"
	rowMissingTags       = "Tags of a missing bucket"
	rowVersioning        = "Versioning"
	rowLifecycle         = "Lifecycle rules"
	rowPublicAccessBlock = "Public access block"
	rowPolicy            = "Bucket policy"
	rowCORS              = "Bucket CORS"
	rowVersions          = "Versions and delete markers listed (purge)"
	rowUploads           = "Incomplete multipart uploads listed and aborted (purge)"
	rowHealth            = "Store health check: ListBuckets asking for one bucket"
	rowHealthBadKeys     = "Health check with a wrong secret, with an unknown key (CredentialsInvalid)"
	rowOutage            = "Outage seen as unreachable, recovered after restart"
)

// observedTable is what the cases observed.
var observedTable = testenv.NewStoreTable("s3", "internal/s3's contract tests", tableRows...)

// answerCell is how a cell reads an answer: "yes" for success, the refusal's code and
// HTTP status otherwise, and what that means for the operator where it decides.
func answerCell(err error) string {
	var e *Error
	switch {
	case err == nil:
		return "yes"
	case errors.As(err, &e) && e.Kind == KindNotImplemented:
		return fmt.Sprintf("no: `%s` %d (NotSupportedByStore)", e.Code, e.StatusCode)
	case errors.As(err, &e):
		return fmt.Sprintf("`%s` %d", e.Code, e.StatusCode)
	default:
		return err.Error()
	}
}
