package v1alpha1

import (
	"slices"
	"strings"
)

// LegacyBucketNames lets claims of some namespaces keep, on a bucket moved into this
// store, a name outside its lanes and bucketNamePrefix: a name from before lanes, or
// from a store with another prefix, that applications hard-code. The list is the
// platform team's, on the store (tenants write StorageBuckets, never ObjectStores), and
// names each name and who may bring it: it is no opening of the lanes. A bucket of a
// listed name is created here only by the move of a claim that holds it already (its
// status.bucketName, which tenants cannot write), never for a new claim; a name that
// is not listed takes, under spec.move.bucketName: Lane, the name a new claim would
// get in the namespace's lane (docs/moving.md).
type LegacyBucketNames struct {
	// Names are bucket names, each exact ("acme-invoices") or a beginning of at least
	// three characters followed by '*' ("acme-reports-*"), which allows every name that
	// begins so.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9*]$`
	// +kubebuilder:validation:XValidation:rule="self.all(n, !n.contains('*') || (n.indexOf('*') == size(n) - 1 && size(n) >= 4))",message="guardrails.legacyBucketNames[].names: '*' may only end a name, after at least three characters"
	Names []string `json:"names"`
	// Namespaces are the namespaces whose claims may keep these names here, by name
	// (no selector: a label a namespace gains later brings no name with it).
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces"`
}

// LegacyNameAllowed says whether a claim of namespace may keep bucket name on this
// store although it lies outside its lanes or bucketNamePrefix (legacyBucketNames).
func (g *StoreGuardrails) LegacyNameAllowed(namespace, name string) bool {
	for _, l := range g.LegacyBucketNames {
		if !slices.Contains(l.Namespaces, namespace) {
			continue
		}
		for _, n := range l.Names {
			if n == name {
				return true
			}
			if stem, ok := strings.CutSuffix(n, "*"); ok && len(stem) >= 3 && strings.HasPrefix(name, stem) {
				return true
			}
		}
	}
	return false
}
