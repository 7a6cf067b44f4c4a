package s3

import (
	"fmt"

	awspolicy "github.com/hashicorp/awspolicyequivalence"
)

// EquivalentPolicies reports whether two bucket policy documents say the
// same thing, so a controller can compare the policy it wants with what
// GetBucketPolicy returns and write only on a real difference. Stores rewrite
// policies on the way in: SeaweedFS turns ["s3:GetObject"] into
// "s3:GetObject", Versity and AWS reorder and reformat, AWS turns an account
// id principal into arn:aws:iam::ID:root and a condition's false into
// "false". The comparison is the one the Terraform AWS provider uses
// (hashicorp/awspolicyequivalence), maintained against what AWS does:
// whitespace and key order are ignored, arrays are sets, a one-element array
// equals its element, account ids equal their root ARN and scalars in
// conditions compare as strings.
//
// An error means one of the documents is not a policy (not JSON, or a
// Statement that is neither an object nor a list).
func EquivalentPolicies(a, b string) (bool, error) {
	same, err := awspolicy.PoliciesAreEquivalent(a, b)
	if err != nil {
		return false, fmt.Errorf("comparing bucket policies: %w", err)
	}
	return same, nil
}
