package integration_test

import (
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// docs/stores.md's quota store table (testenv.StoreTable): what a StorageBucket's quota and
// usage came to on each store in this suite's tests. TestMain checks it once every
// test has run.

const (
	rowQuota        = "Bucket quota (`spec.quota`, the store's default and max)"
	rowQuotaEnforce = "A write past the quota"
	rowUsage        = "Usage in `status.usage` and the usage metrics"
)

var quotaTable = testenv.NewStoreTable("quota", "the controller suite's quota tests", rowQuota, rowQuotaEnforce, rowUsage)

// quotaTableStores are the table's columns.
var quotaTableStores = []testenv.S3Kind{testenv.SeaweedFS, testenv.Versity, testenv.RGW}
