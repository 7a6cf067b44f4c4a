package v1alpha1

// CORS: what a StorageBucket asks browsers of other origins to be allowed
// (spec.cors). Every list is bounded (names.go: MaxCORSRules, MaxCORSValues,
// MaxCORSValueLength) so that the largest spec.cors, about 400 KB, stays well within
// what etcd stores of one object and what the operator holds per claim.

// CORSRule is one rule of a bucket's CORS configuration: which origins may send which
// methods with which headers, and what a browser may see and cache of the answer. A
// browser's request is answered by the first rule that matches it.
type CORSRule struct {
	// ID names the rule; optional, at most 255 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	ID string `json:"id,omitempty"`
	// AllowedOrigins are the origins (scheme, host and port, e.g.
	// https://app.example.com) that may send cross-origin requests; one "*" may stand
	// for any characters ("https://*.example.com", or "*" for any origin).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	AllowedOrigins []string `json:"allowedOrigins"`
	// AllowedMethods are the HTTP methods those origins may use.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	AllowedMethods []CORSMethod `json:"allowedMethods"`
	// AllowedHeaders are the request headers a preflight may ask for
	// (Access-Control-Request-Headers); one "*" may stand for any characters.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	AllowedHeaders []string `json:"allowedHeaders,omitempty"`
	// ExposeHeaders are the response headers a browser lets the page read (ETag,
	// x-amz-version-id...).
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	ExposeHeaders []string `json:"exposeHeaders,omitempty"`
	// MaxAgeSeconds is how long a browser may cache the answer to a preflight.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	MaxAgeSeconds *int32 `json:"maxAgeSeconds,omitempty"`
}

// CORSMethod is an HTTP method a CORS rule allows.
// +kubebuilder:validation:Enum=GET;PUT;POST;DELETE;HEAD
type CORSMethod string

// The methods S3 allows in a CORS rule.
const (
	CORSMethodGet    CORSMethod = "GET"
	CORSMethodPut    CORSMethod = "PUT"
	CORSMethodPost   CORSMethod = "POST"
	CORSMethodDelete CORSMethod = "DELETE"
	CORSMethodHead   CORSMethod = "HEAD"
)
