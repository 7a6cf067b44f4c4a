package guardrail

import (
	"fmt"
	"regexp"
	"slices"
)

// s3TagCharset is S3's tag character set: letters, digits and spaces of any script,
// and _ . : / = + - @.
var s3TagCharset = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+@-]*$`)

// CheckTags refuses tags S3 would refuse, so the refusal comes before anything is sent
// and names the tag. Lengths and reserved prefixes are checked at admission.
func CheckTags(tags map[string]string) error {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !s3TagCharset.MatchString(k) {
			return &PolicyError{Message: fmt.Sprintf("tag key %q has characters outside S3's tag character set (letters, digits, spaces and _ . : / = + - @)", k)}
		}
		if v := tags[k]; !s3TagCharset.MatchString(v) {
			return &PolicyError{Message: fmt.Sprintf("the value of tag %q has characters outside S3's tag character set (letters, digits, spaces and _ . : / = + - @)", k)}
		}
	}
	return nil
}
