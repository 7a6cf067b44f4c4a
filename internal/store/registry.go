package store

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
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Registry hands out one S3 client per ObjectStore and keeps it while neither the
// store's spec nor its credentials Secret changes. Building a client is cheap, but a
// client also carries the store's request budget (a token bucket), which only works if
// every reconcile of every bucket on the store shares it.
type Registry struct {
	// Client reads cached, labelled Secrets; APIReader reads a credentials Secret the
	// cache does not hold yet (before it is labelled).
	Client    client.Client
	APIReader client.Reader
	Factory   s3.Factory
	// QuotaFactory builds the clients of stores' admin APIs (nil: quota.New).
	QuotaFactory quota.Factory
	// Observer is called for every S3 request, with the store's name.
	Observer func(store, operation string, httpStatus int, err error)
	// RequestTimeout bounds every S3 call made through the clients handed out
	// (see s3.Config.RequestTimeout); zero leaves calls without a deadline of
	// their own.
	RequestTimeout time.Duration
	// MaxReconcilesPerStore caps the StorageBucket reconciles one store may have
	// in flight while there are two or more stores, so a hung store cannot take
	// every worker (with one store the cap is every worker but one, see
	// ReconcileCap); zero means no cap at all.
	MaxReconcilesPerStore int
	// Shards is the number of operator deployments sharing the stores (zero counts
	// as one): each spends 1/Shards of every store's request budget (see Budget).
	Shards int

	mu      sync.Mutex
	clients memo.Versioned[string, *storeClients]
	quotas  memo.Versioned[string, quota.Client]
	secrets map[string]Secret // by "<namespace>/<name>"; see SecretData
	checks  chan event.TypedGenericEvent[client.Object]
	slots   storeSlots
	// moveShares: per store, the share of its budget this process's moves take
	// (SetMoveShare), kept here so that a client rebuilt after a store edit gives it
	// up too.
	moveShares map[string]float64
}

// RequestCheck asks the ObjectStore controller to health-check a store now: a probe
// that could not reach the store lets the store's verdict (which short-circuits every
// other bucket on it) catch up at once instead of after the health-check interval.
func (r *Registry) RequestCheck(store string) {
	select {
	case r.checkEvents() <- event.TypedGenericEvent[client.Object]{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: store}}}:
	default: // a check is already queued; the work queue would merge them anyway
	}
}

// CheckRequests is the source of RequestCheck's events for the ObjectStore controller.
func (r *Registry) CheckRequests() source.Source {
	return source.Channel(r.checkEvents(), &handler.TypedEnqueueRequestForObject[client.Object]{})
}

func (r *Registry) checkEvents() chan event.TypedGenericEvent[client.Object] {
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
	limiter *rate.Limiter
	// perSecond and burst are this shard's budget of the store, which limiter spends
	// less what the moves take (see SetMoveShare).
	perSecond float64
	burst     int
	// purges is the part of the budget that every purge on the store together may
	// spend (see PurgeBudget); nil when the store has no budget.
	purges *rate.Limiter

	mu       sync.Mutex
	byRegion map[string]s3.Client
	// introducedBy names, for each region but the store's own, the namespace whose
	// bucket first asked for it (see admitRegion).
	introducedBy map[string]string
}

// Error is a problem with a store's configuration or credentials, reported with
// the condition reason it maps to. It is terminal: retrying will not fix it.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Message }

// ClientFor returns the S3 client for store, signing for the store's region, building
// it when the store's generation or its credentials changed since the last call.
func (r *Registry) ClientFor(ctx context.Context, store *bkv1.ObjectStore) (s3.Client, error) {
	return r.ClientForRegion(ctx, store, Region(store), "")
}

// Bounds on the regions, and so the clients (each with a connection pool of its own),
// that one store may have. spec.region is a tenant's to write: each namespace may bring
// at most maxRegionsPerNamespace regions besides the store's own, and the store serves
// at most maxRegionsPerStore in all. The store's own region is always served, so no
// tenant can crowd it out; a region a store already serves is served to every namespace.
const (
	maxRegionsPerStore     = 16
	maxRegionsPerNamespace = 2
)

// ClientForRegion returns a client for store that signs requests for region, for a
// bucket of namespace ("" for the operator's own requests): a bucket whose spec.region
// differs from the store's must be addressed with its own region (AWS refuses a
// signature scoped to another region with AuthorizationHeaderMalformed). All clients of
// a store share one token bucket, so the store's requestsPerSecond is a budget for the
// store, not per region.
func (r *Registry) ClientForRegion(ctx context.Context, store *bkv1.ObjectStore, region, namespace string) (s3.Client, error) {
	home := Region(store)
	if region == "" {
		region = home
	}
	creds, credsVersion, err := r.credentials(ctx, store.Spec.CredentialsSecretRef)
	if err != nil {
		return nil, err
	}
	version := fmt.Sprintf("%s/%d/%s", store.UID, store.Generation, credsVersion)

	entry, _ := r.clients.Get(store.Name, version, func() (*storeClients, error) {
		perSecond, burst := r.Budget(store)
		e := &storeClients{
			limiter:      s3.NewLimiter(perSecond, burst),
			purges:       s3.NewLimiter(perSecond/purgeShare, max(1, burst/purgeShare)),
			perSecond:    perSecond,
			burst:        burst,
			byRegion:     map[string]s3.Client{},
			introducedBy: map[string]string{},
		}
		e.giveUp(r.moveShare(store.Name))
		return e, nil
	})
	entry.mu.Lock()
	defer entry.mu.Unlock()
	if c, ok := entry.byRegion[region]; ok {
		return c, nil
	}
	if region != home {
		if err := entry.admitRegion(store.Name, namespace); err != nil {
			return nil, err
		}
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
	cfg.Observer = r.observer(store.Name)
	c, err := r.Factory(ctx, cfg)
	if err != nil {
		return nil, &Error{Reason: bkv1.ReasonTLSError, Message: fmt.Sprintf("cannot build a client for store %s: %v", store.Name, err)}
	}
	entry.byRegion[region] = c
	if region != home {
		entry.introducedBy[region] = namespace
	}
	return c, nil
}

// admitRegion refuses a region beyond the store's or the namespace's bound.
func (e *storeClients) admitRegion(store, namespace string) error {
	others := 0
	for _, ns := range e.introducedBy {
		if ns == namespace {
			others++
		}
	}
	switch {
	case len(e.introducedBy) >= maxRegionsPerStore-1: // the store's own region is the last place
		return &Error{Reason: bkv1.ReasonConfigFailed, Message: fmt.Sprintf(
			"ObjectStore %q already serves %d regions, the most one store may: use one of them in spec.region", store, maxRegionsPerStore)}
	case namespace != "" && others >= maxRegionsPerNamespace:
		return &Error{Reason: bkv1.ReasonConfigFailed, Message: fmt.Sprintf(
			"namespace %q already uses %d regions of ObjectStore %q besides its own, the most one namespace may: use one of them, or the store's, in spec.region",
			namespace, maxRegionsPerNamespace, store)}
	}
	return nil
}

// purgeShare: purges together may spend 1/purgeShare of a store's request budget.
const purgeShare = 4

// PurgeBudget is the part of store's request budget that all purges on it together may
// spend: a purge sends a request per incomplete upload and per page of versions, and
// one tenant's purge must not take the budget every other bucket on the store is
// provisioned and probed with. nil means no bound (the store has no budget, or no
// client was built for it yet, which ClientForRegion does first).
func (r *Registry) PurgeBudget(store *bkv1.ObjectStore) *rate.Limiter {
	if entry, ok := r.clients.Current(store.Name); ok {
		return entry.purges
	}
	return nil
}

// Budget is this shard's part of store's request budget (spec.requestsPerSecond and
// spec.burst): with several shards each one's S3 clients and probe scheduler spend
// ShardBudget of it, so the shards together stay within the store's budget.
func (r *Registry) Budget(store *bkv1.ObjectStore) (perSecond float64, burst int) {
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

// SetMoveShare sets the share of store's budget (from 0 to MoveShareOfBudget) that
// the movers of the moves this process runs into or out of it take: the operator's
// own requests to the store (provisioning, configuration, probes, purges, health
// checks) give it up while they run, so that the operator and the movers together
// never spend more than the store's budget. The caller sets it before a move's
// movers start and lowers it once they stopped.
func (r *Registry) SetMoveShare(store string, share float64) {
	share = min(max(share, 0), defaults.MoveShareOfBudget)
	r.mu.Lock()
	if r.moveShares == nil {
		r.moveShares = map[string]float64{}
	}
	if share == 0 {
		delete(r.moveShares, store)
	} else {
		r.moveShares[store] = share
	}
	r.mu.Unlock()
	// A client being built meanwhile read the share after it was set above, or is
	// returned here once built: either way it gives up the new share.
	if entry, ok := r.clients.Current(store); ok {
		entry.giveUp(share)
	}
}

// MoveShare is the share of store's budget the moves of this process take
// (SetMoveShare).
func (r *Registry) MoveShare(store string) float64 { return r.moveShare(store) }

func (r *Registry) moveShare(store string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.moveShares[store]
}

// giveUp lowers the operator's own rate and burst of the store by the share the
// moves take (the burst to at least one request).
func (e *storeClients) giveUp(share float64) {
	if e.limiter == nil {
		return // no budget
	}
	e.limiter.SetLimit(rate.Limit(e.perSecond * (1 - share)))
	e.limiter.SetBurst(max(1, int(float64(e.burst)*(1-share))))
}

// Forget drops the client of a deleted store.
func (r *Registry) Forget(store string) {
	r.clients.Forget(store)
	r.quotas.Forget(store)
	r.mu.Lock()
	delete(r.moveShares, store)
	r.mu.Unlock()
}

// credentials reads the Secret ref names and returns its data and a version string
// that changes whenever the Secret does. No ref means the SDK's default chain.
func (r *Registry) credentials(ctx context.Context, ref *bkv1.SecretReference) (map[string]string, string, error) {
	if ref == nil {
		return map[string]string{}, "default-chain", nil
	}
	secret, err := r.SecretData(ctx, ref)
	if err != nil {
		return nil, "", err
	}
	data := map[string]string{}
	for k, v := range secret.Data {
		data[k] = string(v)
	}
	if data[bkv1.CredentialsKeyAccessKeyID] == "" || data[bkv1.CredentialsKeySecretAccessKey] == "" {
		return nil, "", &Error{Reason: bkv1.ReasonCredentialsMissing,
			Message: fmt.Sprintf("Secret %s/%s must have the keys %s and %s", ref.Namespace, ref.Name, bkv1.CredentialsKeyAccessKeyID, bkv1.CredentialsKeySecretAccessKey)}
	}
	return data, secret.version(), nil
}

// Secret is the data of a Secret an ObjectStore names, as of one version.
type Secret struct {
	uid             types.UID
	ResourceVersion string
	Data            map[string][]byte
}

// version changes whenever the Secret does, also when it is deleted and made again.
func (s Secret) version() string { return string(s.uid) + "/" + s.ResourceVersion }

// SecretData returns the data of a Secret a store names, and its version
// ("<uid>/<resourceVersion>"). The cache holds no Secret's data (TransformSecret), since
// anyone may label a Secret so that it is cached: the data of the Secrets ObjectStores
// name is read from the API server when their version changes and kept here, one entry
// per Secret a store names, which only the platform team decides.
func (r *Registry) SecretData(ctx context.Context, ref *bkv1.SecretReference) (Secret, error) {
	secret, err := r.labelledSecret(ctx, ref)
	if err != nil {
		return Secret{}, err
	}
	key := ref.Namespace + "/" + ref.Name
	r.mu.Lock()
	known, ok := r.secrets[key]
	r.mu.Unlock()
	if ok && known.uid == secret.UID && known.ResourceVersion == secret.ResourceVersion {
		return known, nil
	}
	if _, summary := secret.Labels[bkv1.LabelCachedDataDigest]; summary {
		secret = &corev1.Secret{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
			if apierrors.IsNotFound(err) {
				return Secret{}, &Error{Reason: bkv1.ReasonCredentialsMissing, Message: fmt.Sprintf("Secret %s/%s not found", ref.Namespace, ref.Name)}
			}
			return Secret{}, err
		}
	}
	known = Secret{uid: secret.UID, ResourceVersion: secret.ResourceVersion, Data: secret.Data}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets == nil {
		r.secrets = map[string]Secret{}
	}
	r.secrets[key] = known
	return known, nil
}

// labelledSecret gets a Secret a store names. The cache only holds labelled Secrets, so
// the first read goes to the API server and labels the Secret: from then on the cache
// holds it and a change to it re-reconciles the store.
func (r *Registry) labelledSecret(ctx context.Context, ref *bkv1.SecretReference) (*corev1.Secret, error) {
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
			return nil, &Error{Reason: bkv1.ReasonCredentialsMissing, Message: fmt.Sprintf("Secret %s/%s not found", ref.Namespace, ref.Name)}
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

func Region(store *bkv1.ObjectStore) string {
	if store.Spec.Region != "" {
		return store.Spec.Region
	}
	return defaults.StoreRegion
}

// observer is Observer bound to one store's name, or nil without an Observer.
func (r *Registry) observer(store string) func(op string, status int, err error) {
	if r.Observer == nil {
		return nil
	}
	return func(op string, status int, err error) { r.Observer(store, op, status, err) }
}
