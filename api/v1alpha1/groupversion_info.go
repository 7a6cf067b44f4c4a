// Package v1alpha1 contains the bucketkeeper.io/v1alpha1 API: ObjectStore, the
// cluster-scoped connection to an S3-compatible store that a platform team owns;
// StorageBucket, the namespaced claim for one bucket on it that an application owns; and
// BucketAccess, an application's own key to StorageBuckets of its namespace.
//
// +kubebuilder:object:generate=true
// +groupName=bucketkeeper.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "bucketkeeper.io", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group-version to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
