package v1alpha1

import "slices"

// This file holds every name users see outside the operator's conditions: the
// finalizer, labels, annotations, bucket tags, Secret keys and the probe's object
// prefix. They are part of the API: changing one breaks what users and their tools
// already read or write.

// Labels, annotations, tags and finalizers the operator owns.
const (
	// Finalizer keeps a StorageBucket (or an ObjectStore in use) until its deletion
	// policy has been carried out against the store.
	Finalizer = "bucketkeeper.io/finalizer"

	// TagClaim and TagUID mark a bucket as owned by one StorageBucket. TagUID holds
	// "<StorageBucket UID>/<namespace UID>". Only a bucket carrying both for this claim
	// counts as "already ours"; a released bucket keeps TagClaim and only the namespace
	// part of TagUID ("/<namespace UID>"), so only a claim with the same namespace/name
	// in the same namespace (not one recreated with that name) re-binds.
	TagClaim = "bucketkeeper.io/claim"
	TagUID   = "bucketkeeper.io/uid"
	// TagCluster names the cluster (--cluster-id, default the kube-system namespace's
	// UID) whose operator owns the bucket. A bucket tagged by another cluster sharing
	// the store is never touched, re-bound or purged.
	TagCluster = "bucketkeeper.io/cluster"
	// TagMovedTo marks a bucket that a move left behind on its old store:
	// "<ObjectStore>/<bucket>" of where it lives now. Its object writes are denied
	// (MoveFreezeSid), and no key of the claim reaches it.
	TagMovedTo = "bucketkeeper.io/moved-to"
	// TagMoveProbe is put on an existing bucket of a move's target for a moment, to see
	// whether the source shows it too: two ObjectStores serving one bucket.
	TagMoveProbe = "bucketkeeper.io/move-probe"
	// MoveFreezeSid is the Sid of the bucket policy statement that denies a moving
	// bucket's object writes from the cutover on.
	MoveFreezeSid = "BucketkeeperMoveFreeze"
	// MaxTagValueLength is S3's limit on a tag value; the claim tag is shortened
	// (with a hash) to stay within it for any namespace and name.
	MaxTagValueLength = 256
	// MaxBucketTags is S3's limit on the tags of one bucket: the spec's, the ownership
	// tags and, on an adopted bucket, the tags it already had, all together.
	MaxBucketTags = 50
	// MaxCORSRules is S3's limit on the rules of a bucket's CORS configuration, which
	// spec.cors keeps to; MaxCORSValues bounds each of a rule's lists of origins and
	// headers, and MaxCORSValueLength each of their values, so that the largest spec.cors
	// (about 400 KB) stays well within what etcd takes of one object and what the
	// operator should hold per claim.
	MaxCORSRules       = 100
	MaxCORSValues      = 10
	MaxCORSValueLength = 128
	// SystemTagPrefix marks tags the store itself sets (aws:cloudformation:...). They
	// cannot be written back, so they are kept on the bucket and never sent.
	SystemTagPrefix = "aws:"

	// TagDeletionBlocked marks a bucket its StorageBucket's deletion policy could not
	// finish because object versions on it were locked, and which was therefore kept
	// (and released) after the store's guardrails.objectLock.releaseBlockedDeletionAfter.
	// Its value says the policy and until when the versions found were locked, for the
	// store's admin who finishes the job.
	TagDeletionBlocked = "bucketkeeper.io/deletion-blocked"

	// ReservedTagPrefix is the tag-key prefix users may not set themselves.
	ReservedTagPrefix = "bucketkeeper.io/"

	// AnnotationProbeRequestedAt asks for an immediate probe when its value changes
	// (the same convention as Flux's reconcile.fluxcd.io/requestedAt).
	AnnotationProbeRequestedAt = "bucketkeeper.io/probe-requested-at"

	// AnnotationDeletionPolicy set to DeletionPolicyOrphan on a StorageBucket abandons
	// its bucket: deletion removes the finalizer without contacting the store, the way
	// out when the store or its credentials are gone for good. The bucket keeps its
	// tags, so a later claim of the same cluster, namespace and name binds it again.
	AnnotationDeletionPolicy = "bucketkeeper.io/deletion-policy"
	DeletionPolicyOrphan     = "Orphan"

	// AnnotationRotateRequestedAt asks a BucketAccess for a new key when its value
	// changes; the handled value is recorded in status.rotation.lastHandledRequest.
	AnnotationRotateRequestedAt = "bucketkeeper.io/rotate-requested-at"

	// LabelBucketAccess marks the Secret a BucketAccess writes (value: its name).
	LabelBucketAccess = "bucketkeeper.io/bucketaccess"

	// LabelManagedBy marks the Secrets the operator writes; the manager's cache
	// selects Secrets by it so it never caches every Secret in the cluster.
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	LabelManagedByValue = "bucketkeeper"
)

// Keys the connection Secret of a StorageBucket and the Secret of a BucketAccess carry
// besides the endpoint, region and keys, so that an application with only the Secret
// can reach a self-hosted store.
const (
	// SecretKeyCABundle holds the store's spec.caBundle (PEM), present only when the
	// store has one. Mount the Secret as a volume and point AWS_CA_BUNDLE at this key's
	// file: the AWS SDKs read that variable as a path, not as PEM text.
	SecretKeyCABundle = "BUCKET_CA_BUNDLE"
	// SecretKeyForcePathStyle is "true" when the store addresses buckets as
	// endpoint/bucket (spec.forcePathStyle), "false" for virtual-hosted style
	// (bucket.endpoint). Always present.
	SecretKeyForcePathStyle = "BUCKET_FORCE_PATH_STYLE"
)

// WebIdentityTokenDir is where the Pod of a keyless BucketAccess (spec.serviceAccountName)
// mounts its projected ServiceAccount token volume, whose one path is "token": the
// Secret's AWS_WEB_IDENTITY_TOKEN_FILE is WebIdentityTokenPath. (The SDKs read the
// file again before each session, and the kubelet renews it.)
const (
	WebIdentityTokenDir  = "/var/run/secrets/bucketkeeper.io/serviceaccount"
	WebIdentityTokenPath = WebIdentityTokenDir + "/token"
)

// CanaryPrefix is where ReadWrite probes write their canary object (named after the
// StorageBucket's UID, deleted after every probe). Event notifications for keys under
// it are ignored by the webhook; filter them out of a bucket's notifications as well.
const CanaryPrefix = ".bucketkeeper/probe/"

// Keys of a credentials Secret an ObjectStore names in spec.credentialsSecretRef.
const (
	CredentialsKeyAccessKeyID     = "accessKeyID"
	CredentialsKeySecretAccessKey = "secretAccessKey"
	// CredentialsKeySessionToken is optional: temporary credentials carry one.
	CredentialsKeySessionToken = "sessionToken"
)

// Keys of the connection Secret, named after the environment variables the AWS SDKs
// read, so that `envFrom` is all an application needs.
const (
	SecretKeyBucketName      = "BUCKET_NAME"
	SecretKeyBucketRegion    = "BUCKET_REGION"
	SecretKeyBucketEndpoint  = "BUCKET_ENDPOINT"
	SecretKeyBucketHost      = "BUCKET_HOST"
	SecretKeyBucketPort      = "BUCKET_PORT"
	SecretKeyAWSRegion       = "AWS_REGION"
	SecretKeyAWSEndpointS3   = "AWS_ENDPOINT_URL_S3"
	SecretKeyAWSAccessKeyID  = "AWS_ACCESS_KEY_ID"
	SecretKeyAWSSecretKey    = "AWS_SECRET_ACCESS_KEY"
	SecretKeyAWSSessionToken = "AWS_SESSION_TOKEN"
)

// The keys of each kind of Secret the operator writes for applications: its writers
// write no other key (a test in each writer's package holds them to it), and
// `kubectl bucketkeeper env` passes on no other key as environment. Anyone who may
// write Secrets in a namespace can add keys to these Secrets; a key off the list is
// theirs, never the operator's. Each is a variable name for a shell.
var (
	// ConnectionSecretKeys are the keys of a StorageBucket's connection Secret.
	ConnectionSecretKeys = []string{
		SecretKeyBucketName, SecretKeyBucketRegion, SecretKeyBucketEndpoint, SecretKeyBucketHost, SecretKeyBucketPort,
		SecretKeyAWSRegion, SecretKeyAWSEndpointS3, SecretKeyForcePathStyle, SecretKeyCABundle,
		SecretKeyAWSAccessKeyID, SecretKeyAWSSecretKey, SecretKeyAWSSessionToken,
	}
	// AccessSecretKeys are the keys of the Secret of a BucketAccess with a key.
	AccessSecretKeys = []string{
		AccessSecretKeyAccessKeyID, AccessSecretKeySecretKey, AccessSecretKeyRegion, AccessSecretKeyEndpoint,
		AccessSecretKeyBucketName, AccessSecretKeyBucketNames, SecretKeyForcePathStyle, SecretKeyCABundle,
	}
	// KeylessAccessSecretKeys are the keys of the Secret of a BucketAccess for a
	// ServiceAccount (spec.serviceAccountName): no key, the role and where STS is.
	KeylessAccessSecretKeys = []string{
		AccessSecretKeyRoleARN, AccessSecretKeyWebIdentityTokenFile, AccessSecretKeyEndpointSTS, AccessSecretKeyRegion,
		AccessSecretKeyEndpoint, AccessSecretKeyBucketName, AccessSecretKeyBucketNames, SecretKeyForcePathStyle, SecretKeyCABundle,
	}
)

// UnlistedSecretKeys returns the keys of data that listed (one of the lists above)
// does not hold, sorted.
func UnlistedSecretKeys(data map[string][]byte, listed []string) []string {
	var out []string
	for k := range data {
		if !slices.Contains(listed, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// LabelSecretRole marks every Secret the manager needs to see: the connection Secrets it
// writes (SecretRoleConnection) and the credentials Secrets stores name
// (SecretRoleCredentials, labelled on first use). The manager's cache selects Secrets by
// this label, so it never holds every Secret in the cluster.
const (
	LabelSecretRole       = "bucketkeeper.io/secret-role"
	SecretRoleConnection  = "connection"
	SecretRoleCredentials = "credentials"
	// SecretRoleAccess marks the Secrets BucketAccesses write.
	SecretRoleAccess = "access"
	// LabelStorageBucket marks a connection Secret with the StorageBucket it belongs to.
	LabelStorageBucket = "bucketkeeper.io/storagebucket"
)

// LabelMove marks the ConfigMaps (in the operator's namespace) holding a move's
// checkpoints, one per shard of its copy, with the move's ID.
const LabelMove = "bucketkeeper.io/move"

// LabelMoveJob marks what the mover Jobs of a move run with, with the move's ID: its
// Jobs, their Pods, the ConfigMaps holding each pass's spec and the Secret holding
// both stores' keys (all in the operator's namespace).
const LabelMoveJob = "bucketkeeper.io/move-job"

// MoveCheckpointPrefix begins the name of a move's checkpoint ConfigMaps:
// bucketkeeper-move-<move ID>-<shard>, and -plan for its plan.
const MoveCheckpointPrefix = "bucketkeeper-move-"

// A namespaced key of the probe webhook is a Secret the platform team writes in the
// operator's namespace (--receiver-keys-namespace), labelled
// LabelSecretRole=SecretRoleReceiverKey. Its name is the key's id, which callers send
// in the X-Bucketkeeper-Key-Id header; ReceiverKeySecretKey holds the HMAC key and
// AnnotationReceiverNamespaces the namespaces whose StorageBuckets the key may probe.
// Only that one namespace is watched for them, so a tenant that labels a Secret of
// its own namespace so makes no key.
const (
	// SecretRoleReceiverKey marks a Secret as a namespaced key of the probe webhook.
	SecretRoleReceiverKey = "receiver-key"
	// ReceiverKeySecretKey is the data key holding the HMAC key (at least 16 bytes;
	// trailing newlines are trimmed).
	ReceiverKeySecretKey = "secret"
	// AnnotationReceiverNamespaces lists, comma-separated, the namespaces whose
	// StorageBuckets the key may probe, e.g. "team-a,team-a-staging". A key that names
	// none, or a name that is not a valid namespace name, is not loaded.
	AnnotationReceiverNamespaces = "bucketkeeper.io/receiver-namespaces"
)

// StoreLeasePrefix begins the name of the Lease (coordination.k8s.io, in the
// operator's namespace) through which operator deployments sharding the buckets
// (--shard-count above 1) agree which of them health-checks a store:
// bucketkeeper-store-<store name>.
const StoreLeasePrefix = "bucketkeeper-store-"

// LabelCachedDataDigest is the label under which the manager's cached copy of a
// connection Secret carries the digest of the data the cache dropped. It exists only in
// the cache: it is computed from the data the API server sent, so nothing written on the
// server can forge it, and it is removed before a cached copy is written back. A label
// rather than an annotation because every connection Secret has labels already: no
// second map per Secret.
const LabelCachedDataDigest = "bucketkeeper.io/cached-data-sha256"

// LabelCachedTruncated marks the manager's cached copy of a Secret whose labels,
// annotations or owner references were shortened, so that a write reads the whole
// object first. Like LabelCachedDataDigest it exists only in the cache.
const LabelCachedTruncated = "bucketkeeper.io/cached-truncated"
