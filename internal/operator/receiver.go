package operator

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/receiver"
)

// The receiver is a Runnable that serves on every replica, not only on the leader (the
// receiver package does not import controller-runtime to say so itself).
var _ manager.LeaderElectionRunnable = (*receiver.Receiver)(nil)

// setupReceiver adds the probe-request webhook when opts asks for it, with its
// namespaced keys (receiverKeys) and, if the platform team chose one, the cluster-wide
// key.
func setupReceiver(mgr manager.Manager, opts Options) error {
	if opts.ReceiverBindAddress == "" {
		return nil
	}
	keysNamespace, err := opts.receiverKeysNamespace()
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("receiver")
	ropts := receiver.Options{
		BindAddress:       opts.ReceiverBindAddress,
		ClusterWideSecret: opts.ReceiverClusterWideSecret,
		NamespacedKeys:    keysNamespace != "",
		TLSCertFile:       opts.ReceiverTLSCertFile,
		TLSKeyFile:        opts.ReceiverTLSKeyFile,
		MaxConnections:    opts.ReceiverMaxConnections,
		Requester:         &storagebucket.ProbeRequester{Client: mgr.GetClient(), Clock: opts.Clock},
		Clock:             opts.Clock,
		Log:               log,
		Observe:           metrics.ObserveReceiverAnswer,
	}
	var keys *receiverKeys
	if keysNamespace != "" {
		keys = &receiverKeys{
			namespace: keysNamespace,
			recorder:  mgr.GetEventRecorder("bucketkeeper-receiver"),
			log:       log.WithValues("keysNamespace", keysNamespace),
			loaded:    map[string]bool{},
			invalid:   map[string]bool{},
		}
		ropts.WaitForKeys = keys.waitSynced
	}
	rcv, err := receiver.New(ropts)
	if err != nil {
		return fmt.Errorf("setting up the probe receiver: %w", err)
	}
	if keys == nil {
		log.Info("no namespace for receiver keys outside a cluster: only the cluster-wide key is accepted")
	} else {
		keys.receiver = rcv
		if err := keys.setup(mgr); err != nil {
			return fmt.Errorf("setting up the probe receiver's keys: %w", err)
		}
	}
	if len(opts.ReceiverClusterWideSecret) > 0 {
		log.Info("the cluster-wide receiver key is accepted: its holder may probe the StorageBuckets of every namespace")
	}
	return mgr.Add(rcv)
}

// receiverKeys feeds the receiver its namespaced keys: the Secrets of one namespace
// (the operator's) labelled bucketkeeper.io/secret-role=receiver-key, one key each,
// named by the Secret's name.
//
// They are watched through a cache of their own, listing and watching only that
// namespace and only that exact label value, so a tenant that labels a Secret of its
// own namespace so makes no key, and its Secrets grow no cache. The manager's Secret
// cache keeps summaries without data (reconcile.TransformSecret) and does not select
// this label at all; this one keeps, of each key Secret, the HMAC key and the namespace
// list, which the receiver needs, and nothing else.
type receiverKeys struct {
	namespace string
	receiver  *receiver.Receiver
	recorder  events.EventRecorder
	log       logr.Logger
	synced    toolscache.InformerSynced

	mu sync.Mutex
	// loaded and invalid are the Secrets in use and refused, for the metric.
	loaded, invalid map[string]bool
}

// setup builds the key cache, registers the handler that turns its Secrets into keys,
// and adds the cache to the manager, which starts it on every replica before the
// receiver (caches do not wait for leadership).
func (k *receiverKeys) setup(mgr manager.Manager) error {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{k.namespace: {}},
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Label:     labels.SelectorFromSet(labels.Set{bkv1.LabelSecretRole: bkv1.SecretRoleReceiverKey}),
			Transform: receiverKeyTransform,
		}},
	})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(context.Background(), &corev1.Secret{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: k.apply,
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*corev1.Secret)
			c, _ := cur.(*corev1.Secret)
			if o != nil && c != nil && o.ResourceVersion == c.ResourceVersion {
				return // a resync: nothing changed
			}
			k.apply(cur)
		},
		DeleteFunc: k.remove,
	})
	if err != nil {
		return err
	}
	k.synced = reg.HasSynced
	return mgr.Add(keyCache{c})
}

// keyCache hands the key cache to the manager as a cache (GetCache), which the manager
// starts with its own, on every replica, and waits to sync before other runnables.
type keyCache struct{ cache.Cache }

func (c keyCache) GetCache() cache.Cache { return c.Cache }

// waitSynced returns once every key Secret that existed at start is loaded (or
// refused), so a caller is never refused for a key that merely was not read yet.
func (k *receiverKeys) waitSynced(ctx context.Context) bool {
	return toolscache.WaitForCacheSync(ctx.Done(), k.synced)
}

// apply loads a key Secret, or refuses it (the key stops working) with a log line, a
// Warning Event on the Secret and the metric; none of them carries the key.
func (k *receiverKeys) apply(obj any) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	key, err := keyFromSecret(s)
	if err == nil {
		err = k.receiver.SetKey(key)
	} else {
		k.receiver.DisableKey(s.Name)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		delete(k.loaded, s.Name)
		k.invalid[s.Name] = true
		k.log.Error(err, "receiver key not loaded", "key", s.Name)
		k.recorder.Eventf(s, nil, corev1.EventTypeWarning, bkv1.EventReasonReceiverKeyInvalid, "LoadReceiverKey",
			"not used as a probe-webhook key: %s", err.Error())
	} else {
		delete(k.invalid, s.Name)
		k.loaded[s.Name] = true
		k.log.Info("receiver key loaded", "key", s.Name, "namespaces", key.Namespaces)
	}
	metrics.SetReceiverKeys(len(k.loaded), len(k.invalid))
}

// remove forgets the key of a deleted Secret, with its state and its metric series.
func (k *receiverKeys) remove(obj any) {
	var name string
	switch o := obj.(type) {
	case *corev1.Secret:
		name = o.Name
	case toolscache.DeletedFinalStateUnknown:
		_, n, err := toolscache.SplitMetaNamespaceKey(o.Key)
		if err != nil {
			return
		}
		name = n
	default:
		return
	}
	k.receiver.RemoveKey(name)
	metrics.ForgetReceiverKey(name)
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.loaded, name)
	delete(k.invalid, name)
	k.log.Info("receiver key removed", "key", name)
	metrics.SetReceiverKeys(len(k.loaded), len(k.invalid))
}

// keyFromSecret reads a key Secret; the errors name what is missing or wrong, never a
// value of the Secret's data.
func keyFromSecret(s *corev1.Secret) (receiver.Key, error) {
	secret := receiver.TrimSecret(s.Data[bkv1.ReceiverKeySecretKey])
	if len(secret) == 0 {
		return receiver.Key{}, fmt.Errorf("data key %q, the HMAC key, is missing or empty", bkv1.ReceiverKeySecretKey)
	}
	list, ok := s.Annotations[bkv1.AnnotationReceiverNamespaces]
	if !ok {
		return receiver.Key{}, fmt.Errorf("annotation %s is missing: it names the namespaces the key may probe", bkv1.AnnotationReceiverNamespaces)
	}
	namespaces, err := receiver.ParseNamespaces(list)
	if err != nil {
		return receiver.Key{}, fmt.Errorf("annotation %s: %w", bkv1.AnnotationReceiverNamespaces, err)
	}
	return receiver.Key{ID: s.Name, Secret: secret, Namespaces: namespaces}, nil
}

// receiverKeyTransform keeps of a key Secret what loading and reporting it need: its
// identity, the namespace list and the HMAC key.
func receiverKeyTransform(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	out := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
	}}
	if v, ok := s.Annotations[bkv1.AnnotationReceiverNamespaces]; ok {
		out.Annotations = map[string]string{bkv1.AnnotationReceiverNamespaces: v}
	}
	if v, ok := s.Data[bkv1.ReceiverKeySecretKey]; ok {
		out.Data = map[string][]byte{bkv1.ReceiverKeySecretKey: v}
	}
	return out, nil
}
