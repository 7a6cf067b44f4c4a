package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// StoreRegistry hands out one S3 client per ObjectStore and keeps it while neither the
// store's spec nor its credentials Secret changes. Building a client is cheap, but a
// client also carries the store's request budget (a token bucket), which only works if
// every reconcile of every bucket on the store shares it.
type StoreRegistry struct {
	// Client reads cached, labelled Secrets; APIReader reads a credentials Secret the
	// cache does not hold yet (before it is labelled).
	Client    client.Client
	APIReader client.Reader
	Factory   s3.Factory
	// Observer is called for every S3 request, with the store's name.
	Observer func(store, operation string, httpStatus int, err error)
	// RequestTimeout bounds every S3 call made through the clients handed out
	// (see s3.Config.RequestTimeout); zero leaves calls without a deadline of
	// their own.
	RequestTimeout time.Duration
	// MaxReconcilesPerStore caps the StorageBucket reconciles one store may have
	// in flight while there are two or more stores, so a hung store cannot take
	// every worker (with one store the cap is every worker but one, see
	// reconcileCap); zero means no cap at all.
	MaxReconcilesPerStore int
	// Shards is the number of operator deployments sharing the stores (zero counts
	// as one): each spends 1/Shards of every store's request budget (see Budget).
	Shards int

	mu      sync.Mutex
	clients map[string]*storeClients
	checks  chan event.TypedGenericEvent[client.Object]
	slots   storeSlots
}

// RequestCheck asks the ObjectStore controller to health-check a store now: a probe
// that could not reach the store lets the store's verdict (which short-circuits every
// other bucket on it) catch up at once instead of after the health-check interval.
func (r *StoreRegistry) RequestCheck(store string) {
	select {
	case r.checkEvents() <- event.TypedGenericEvent[client.Object]{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: store}}}:
	default: // a check is already queued; the work queue would merge them anyway
	}
}

// CheckRequests is the source of RequestCheck's events for the ObjectStore controller.
func (r *StoreRegistry) CheckRequests() source.Source {
	return source.Channel(r.checkEvents(), &handler.TypedEnqueueRequestForObject[client.Object]{})
}

func (r *StoreRegistry) checkEvents() chan event.TypedGenericEvent[client.Object] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checks == nil {
		r.checks = make(chan event.TypedGenericEvent[client.Object], 64)
	}
	return r.checks
}

// storeClients are the clients of one store: one per signing region, all sharing the
// store's request budget (limiter), rebuilt together when the store or its credentials
// change (version).
type storeClients struct {
	version  string
	limiter  *rate.Limiter
	byRegion map[string]s3.Client
}

// StoreError is a problem with a store's configuration or credentials, reported with
// the condition reason it maps to. It is terminal: retrying will not fix it.
type StoreError struct {
	Reason  string
	Message string
}

func (e *StoreError) Error() string { return e.Message }

// ClientFor returns the S3 client for store, signing for the store's region, building
// it when the store's generation or its credentials changed since the last call.
func (r *StoreRegistry) ClientFor(ctx context.Context, store *bkv1.ObjectStore) (s3.Client, error) {
	return r.ClientForRegion(ctx, store, storeRegion(store))
}

// ClientForRegion returns a client for store that signs requests for region: a bucket
// whose spec.region differs from the store's must be addressed with its own region
// (AWS refuses a signature scoped to another region with AuthorizationHeaderMalformed).
// All clients of a store share one token bucket, so the store's requestsPerSecond is a
// budget for the store, not per region.
// maxRegionsPerStore bounds the regions, and so the clients, one store may have.
const maxRegionsPerStore = 16

func (r *StoreRegistry) ClientForRegion(ctx context.Context, store *bkv1.ObjectStore, region string) (s3.Client, error) {
	if region == "" {
		region = storeRegion(store)
	}
	creds, credsVersion, err := r.credentials(ctx, store.Spec.CredentialsSecretRef)
	if err != nil {
		return nil, err
	}
	version := fmt.Sprintf("%s/%d/%s", store.UID, store.Generation, credsVersion)

	r.mu.Lock()
	defer r.mu.Unlock()
	entry, ok := r.clients[store.Name]
	if !ok || entry.version != version {
		entry = &storeClients{
			version:  version,
			limiter:  s3.NewLimiter(r.Budget(store)),
			byRegion: map[string]s3.Client{},
		}
		if r.clients == nil {
			r.clients = map[string]*storeClients{}
		}
		r.clients[store.Name] = entry
	}
	if c, ok := entry.byRegion[region]; ok {
		return c, nil
	}
	if len(entry.byRegion) >= maxRegionsPerStore {
		// spec.region is a tenant's to write, and each region costs a client with its
		// own connection pool: a bounded number, however many claims ask.
		return nil, &StoreError{Reason: bkv1.ReasonConfigFailed, Message: fmt.Sprintf(
			"ObjectStore %q already serves %d regions, the most one store may: use one of them in spec.region", store.Name, maxRegionsPerStore)}
	}
	perSecond, burst := r.Budget(store)
	cfg := s3.Config{
		Endpoint:              store.Spec.Endpoint,
		Region:                region,
		ForcePathStyle:        store.Spec.ForcePathStyle,
		AccessKeyID:           creds[bkv1.CredentialsKeyAccessKeyID],
		SecretAccessKey:       creds[bkv1.CredentialsKeySecretAccessKey],
		SessionToken:          creds[bkv1.CredentialsKeySessionToken],
		CABundle:              []byte(store.Spec.CABundle),
		InsecureSkipTLSVerify: store.Spec.InsecureSkipTLSVerify,
		RequestsPerSecond:     perSecond,
		Burst:                 burst,
		Limiter:               entry.limiter,
		RequestTimeout:        r.RequestTimeout,
	}
	if r.Observer != nil {
		name := store.Name
		cfg.Observer = func(op string, status int, err error) { r.Observer(name, op, status, err) }
	}
	c, err := r.Factory(ctx, cfg)
	if err != nil {
		return nil, &StoreError{Reason: bkv1.ReasonTLSError, Message: fmt.Sprintf("cannot build a client for store %s: %v", store.Name, err)}
	}
	entry.byRegion[region] = c
	return c, nil
}

// Budget is this shard's part of store's request budget (spec.requestsPerSecond and
// spec.burst): with several shards each one's S3 clients and probe scheduler spend
// ShardBudget of it, so the shards together stay within the store's budget.
func (r *StoreRegistry) Budget(store *bkv1.ObjectStore) (perSecond float64, burst int) {
	return ShardBudget(float64(store.Spec.RequestsPerSecond), int(store.Spec.Burst), r.Shards)
}

// ShardBudget divides a store's budget among shards: the steady rate exactly, the
// burst rounded down but at least one request, so the shards together send at most
// perSecond per second and, for a burst of at least shards, at most burst at once.
// Dividing evenly is conservative: a shard with many buckets on a store may not borrow
// what a shard with few leaves unused, so no coordination is needed for the budget to
// hold.
func ShardBudget(perSecond float64, burst, shards int) (float64, int) {
	if shards <= 1 || perSecond <= 0 { // no budget: nothing to divide
		return perSecond, burst
	}
	return perSecond / float64(shards), max(1, burst/shards)
}

// Forget drops the client of a deleted store.
func (r *StoreRegistry) Forget(store string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.clients, store)
}

// credentials reads the Secret ref names and returns its data and a version string
// that changes whenever the Secret does. No ref means the SDK's default chain.
func (r *StoreRegistry) credentials(ctx context.Context, ref *bkv1.SecretReference) (map[string]string, string, error) {
	if ref == nil {
		return map[string]string{}, "default-chain", nil
	}
	secret, err := r.labelledSecret(ctx, ref)
	if err != nil {
		return nil, "", err
	}
	data := map[string]string{}
	for k, v := range secret.Data {
		data[k] = string(v)
	}
	if data[bkv1.CredentialsKeyAccessKeyID] == "" || data[bkv1.CredentialsKeySecretAccessKey] == "" {
		return nil, "", &StoreError{Reason: bkv1.ReasonCredentialsMissing,
			Message: fmt.Sprintf("Secret %s/%s must have the keys %s and %s", ref.Namespace, ref.Name, bkv1.CredentialsKeyAccessKeyID, bkv1.CredentialsKeySecretAccessKey)}
	}
	return data, string(secret.UID) + "/" + secret.ResourceVersion, nil
}

// labelledSecret gets a Secret a store names. The cache only holds labelled Secrets, so
// the first read goes to the API server and labels the Secret: from then on the cache
// holds it and a change to it re-reconciles the store.
func (r *StoreRegistry) labelledSecret(ctx context.Context, ref *bkv1.SecretReference) (*corev1.Secret, error) {
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, key, secret)
	if err == nil {
		return secret, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &StoreError{Reason: bkv1.ReasonCredentialsMissing, Message: fmt.Sprintf("Secret %s/%s not found", ref.Namespace, ref.Name)}
		}
		return nil, err
	}
	if secret.Labels[bkv1.LabelSecretRole] == "" {
		patch := client.MergeFrom(secret.DeepCopy())
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels[bkv1.LabelSecretRole] = bkv1.SecretRoleCredentials
		if err := r.Client.Patch(ctx, secret, patch); err != nil {
			return nil, fmt.Errorf("labelling Secret %s/%s so that changes to it are seen: %w", ref.Namespace, ref.Name, err)
		}
	}
	return secret, nil
}

func storeRegion(store *bkv1.ObjectStore) string {
	if store.Spec.Region != "" {
		return store.Spec.Region
	}
	return defaults.StoreRegion
}
