package integration_test

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// docs/stores.md's object lock store table (testenv.StoreTable): what each store did
// with a StorageBucket's spec.objectLock, its application's key and its purge in this
// suite's object lock tests. TestMain checks it once every test has run.

const (
	rowLockCreate    = "Object lock at creation (`spec.objectLock`)"
	rowLockDefault   = "Default retention (`defaultRetention`), removed or shortened by hand"
	rowLockCounted   = "A default retention locks"
	rowLockExisting  = "Object lock turned on for an existing bucket"
	rowLockKey       = "Against the application's key (ReadWrite)"
	rowLockHeaders   = "The key's own PutObject with a Compliance retention"
	rowLockRetention = "The key's PutObjectRetention, where `allowedModes` include Compliance"
	rowLockShort     = "The key's own PutObject with a Governance retention of seconds on a Compliance default, or a legal hold"
	rowLockPurge     = "Purge of a bucket with locked versions"
	rowLockBypass    = "Governance bypass by a Purge (`purgeMayBypassGovernance`)"
	rowLockComply    = "Compliance, with the bypass allowed"
)

var lockTable = testenv.NewStoreTable("objectlock", "the controller suite's object lock tests",
	rowLockCreate, rowLockDefault, rowLockCounted, rowLockExisting, rowLockKey, rowLockHeaders, rowLockRetention, rowLockShort, rowLockPurge, rowLockBypass, rowLockComply)

// lockTableStores are the table's columns.
var lockTableStores = []testenv.S3Kind{testenv.SeaweedFS, testenv.Versity, testenv.RGW}

// refusalCell is how a cell names a store's refusal of a raw SDK call: its code and
// HTTP status.
func refusalCell(err error) string {
	var api smithy.APIError
	var status interface{ HTTPStatusCode() int }
	code, http := "", 0
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	if errors.As(err, &status) {
		http = status.HTTPStatusCode()
	}
	return fmt.Sprintf("`%s` %d", code, http)
}
