package integration_test

import "github.com/bucketkeeper/bucketkeeper/test/testenv"

// docs/stores.md's move store table (testenv.StoreTable): what became of a bucket moved
// from the store of the row to the store of the column, in TestMoveKeepsEveryAcknowledgedWrite
// (an application writing all along; from MinIO, TestMoveOffMinIOFreezesItsKeys) and,
// from a store to itself, TestMoveOntoItselfIsRefused.
// TestMain checks it once every test has run.

// moveTableStores are the table's columns, and its rows.
var moveTableStores = []testenv.S3Kind{testenv.SeaweedFS, testenv.Versity, testenv.RGW}

var moveTable = testenv.NewStoreTable("move", "the controller suite's move tests",
	moveRow(testenv.SeaweedFS), moveRow(testenv.Versity), moveRow(testenv.RGW), moveRow(testenv.MinIO))

// moveRow is the row of the moves out of a store.
func moveRow(from testenv.S3Kind) string { return "Moved from " + testenv.StoreTitle[from] }

const (
	// cellMoved is what TestMoveKeepsEveryAcknowledgedWrite proved of a pair.
	cellMoved = "Done: every object equal, 0 acknowledged writes lost, the old key refused, the aws CLI working with the switched Secret alone, the source frozen"
	// cellMoveOntoItself is what TestMoveOntoItselfIsRefused proved of a store.
	cellMoveOntoItself = "refused (`MoveNotAllowed`), the bucket unchanged: one bucket under two ObjectStores"
)
