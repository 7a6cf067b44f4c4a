package guardrail

// BucketOwnerAdoptable is the adoption guardrail's verdict on a pre-existing bucket's
// owner, named as its ACL names it ("" where the store names none): the operator and
// the plugin's adopt both ask it, so a manifest adopt writes is one the operator takes.
//
// A named owner must be the operator's account, as want gives it (the store's
// guardrails.adoptionBucketOwner, or ListBuckets' owner for the operator's
// credentials); want is asked only then. A bucket that names no owner is adoptable only
// where the store admin stated that the store has one account (singleAccount,
// guardrails.adoptionSingleAccount): an owner the store does not name is never guessed
// from anything a tenant controls, and never inferred from the store's answers, since
// "no owner" reads the same on a store with one account and on one with many.
func BucketOwnerAdoptable(named string, singleAccount bool, want func() (string, error)) (bool, error) {
	if named == "" {
		return singleAccount, nil
	}
	w, err := want()
	if err != nil {
		return false, err
	}
	return w != "" && named == w, nil
}
