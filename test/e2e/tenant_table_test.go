package e2e_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// docs/stores.md's tenant table (testenv.StoreTable): what the tenant suite saw each
// guardrail do on each store. A cell is written only once its subtest has proved the
// store unchanged; TestMain checks the table after the run.

const (
	rowTenantAdopt  = "An untagged bucket in the tenant's lane, named plainly, with `adoption: IfUnowned` or a forged annotation"
	rowTenantNames  = "A name outside `bucketNamePrefix`, or another namespace's derived name"
	rowTenantPublic = "A public bucket policy, or `publicAccess: Allowed`"
	// TestAnonymousPrincipalForms fills this row.
	rowTenantPrincipals = "Anonymous principal forms: a policy granting read, write and list to Ceph RGW's names for its anonymous user (`arn:aws:iam:::user/anonymous`, `arn:aws:iam:::root`), a `Federated` one, a bare `anonymous` or name, a `CanonicalUser` or a `Service`"
	rowTenantPolicy     = "A policy granting a bucket of the platform team's to another account"
	rowTenantPurge      = "Every refused claim deleted, several asking for Purge"
	rowAdoptGranted     = "Adoption once `adoptionAllowedNamespaces` selects the namespace"
)

var tenantTable = testenv.NewStoreTable("tenant", "the e2e tenant suite",
	rowTenantAdopt, rowTenantNames, rowTenantPublic, rowTenantPrincipals, rowTenantPolicy, rowTenantPurge, rowAdoptGranted)

// tenantTableStores are the table's columns: every store the tenant suite runs on.
var tenantTableStores = []testenv.S3Kind{testenv.SeaweedFS, testenv.Versity, testenv.RGW}

// refusedCell reads the reasons a row's claims were refused with, and what the test
// proved about the store afterwards.
func refusedCell(reasons []string, proved string) string {
	slices.Sort(reasons)
	reasons = slices.Compact(reasons)
	for i, r := range reasons {
		reasons[i] = "`" + r + "`"
	}
	return fmt.Sprintf("refused (%s); %s", strings.Join(reasons, ", "), proved)
}
