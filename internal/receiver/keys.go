package receiver

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Keys.
//
// A request names its key in KeyIDHeader; a request without that header is signed
// with the cluster-wide key, if the operator was given one (Options.ClusterWideSecret,
// an explicit choice of the platform team: its holder may probe, and learn the claims
// behind bucket names, in every namespace). Every other key is namespaced: it reaches
// only the StorageBuckets of the namespaces it names, and the answers about anything
// else are the answers about a StorageBucket that does not exist, so its holder can
// neither probe, nor name, nor detect a claim outside them.
//
// Each key has its own rate limiter and replay guard, created when the key is set (by
// the operator, from a Secret the platform team wrote) and dropped when it is removed:
// a request naming an unknown key id is refused on its headers and creates nothing,
// so what the receiver holds grows with the keys the platform team made, not with
// what callers send. The key id is not a secret (it is the Secret's name); a request
// naming an unknown one reads the same as any other authentication failure.

// MaxKeyNamespaces bounds the namespaces one key may name: an S3 event is looked up
// once per named bucket and namespace, so a request's cost grows with it. A caller
// that needs more gets several keys, or the platform team chooses the cluster-wide key.
const MaxKeyNamespaces = 100

// Labels of the key dimension in Options.Observe (a namespaced key is labelled with its
// id, which is never "*" nor empty: ids are Secret names).
const (
	// ObserveNoKey labels answers to requests whose headers named no usable key, or
	// failed before the key was known, so what a caller sends never becomes a label.
	ObserveNoKey = ""
	// ObserveClusterWideKey labels answers to requests signed with the cluster-wide key.
	ObserveClusterWideKey = "*"
)

// Key is a namespaced key: the operator builds one from each Secret labelled as a
// receiver key (see SetKey).
type Key struct {
	// ID is what callers send in KeyIDHeader: the Secret's name.
	ID string
	// Secret is the HMAC key, at least MinSecretLen bytes.
	Secret []byte
	// Namespaces are the namespaces whose StorageBuckets the key reaches (see
	// ParseNamespaces); at least one, at most MaxKeyNamespaces.
	Namespaces []string
}

// ParseNamespaces reads a comma-separated namespace list (the Secret's
// bucketkeeper.io/receiver-namespaces annotation). Blanks around names and empty
// entries are ignored and repeats dropped; a name that is not a valid namespace name
// fails the whole list, so a typo never silently narrows or widens a key. The error
// names the first bad entry: the annotation is the platform team's, not a secret.
func ParseNamespaces(list string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(list, ",") {
		ns := strings.TrimSpace(part)
		if ns == "" || slices.Contains(out, ns) {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		out = append(out, ns)
	}
	return out, nil
}

// checkKey validates a namespaced key; the error never contains the key's secret.
func checkKey(k Key) error {
	if errs := validation.IsDNS1123Subdomain(k.ID); len(errs) > 0 {
		return fmt.Errorf("key id %q is not a Secret name", k.ID)
	}
	if err := checkSecret(k.Secret); err != nil {
		return err
	}
	switch {
	case len(k.Namespaces) == 0:
		return errors.New("the key names no namespace")
	case len(k.Namespaces) > MaxKeyNamespaces:
		return fmt.Errorf("the key names %d namespaces, at most %d are allowed", len(k.Namespaces), MaxKeyNamespaces)
	}
	for _, ns := range k.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("%q is not a namespace name", ns)
		}
	}
	return nil
}

// keyState is what a key's callers can fill: its own rate limiter and replay guard.
type keyState struct {
	limiter *rate.Limiter
	replays replayGuard
}

// keyEntry is a usable key as a request sees it; it is never changed after it was
// built, so a request holds it without a lock. A new secret or namespace list is a new
// entry sharing the old one's state.
type keyEntry struct {
	// id is the key id; "" for the cluster-wide key.
	id     string
	secret []byte
	// namespaces is nil for the cluster-wide key (every namespace), else the set of
	// the namespaces the key reaches; lookups lists them in the Secret's order.
	namespaces map[string]bool
	lookups    []string
	state      *keyState
}

// allows reports whether the key reaches the StorageBuckets of namespace ns.
func (k *keyEntry) allows(ns string) bool { return k.namespaces == nil || k.namespaces[ns] }

// lookupNamespaces are the namespaces a bucket name is looked up in: "" (all of them)
// for the cluster-wide key, else each namespace the key reaches, so that the claims of
// other namespaces are never even read for this key's request.
func (k *keyEntry) lookupNamespaces() []string {
	if k.namespaces == nil {
		return []string{""}
	}
	return k.lookups
}

// observeLabel is the key's label in Options.Observe.
func (k *keyEntry) observeLabel() string {
	if k.id == "" {
		return ObserveClusterWideKey
	}
	return k.id
}

// keyring holds the keys. Its size is the platform team's doing: an entry and a state
// exist only for a key set through SetKey (or the cluster-wide key).
type keyring struct {
	clusterWide *keyEntry // nil without a cluster-wide key; fixed at New
	newState    func() *keyState

	mu   sync.RWMutex
	byID map[string]*keyEntry
	// states outlive an entry that became invalid (SetKey with a bad key) while its
	// Secret exists, so a key that is broken and mended keeps its replay guard; they
	// go when the key is removed.
	states map[string]*keyState
}

// lookup returns the key a request names: the cluster-wide key when it names none
// (present is false), else the namespaced key with that id.
func (kr *keyring) lookup(id string, present bool) (*keyEntry, bool) {
	if !present {
		return kr.clusterWide, kr.clusterWide != nil
	}
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	k, ok := kr.byID[id]
	return k, ok
}

// SetKey adds or replaces a namespaced key. A replaced key keeps its rate limiter and
// replay guard; requests already verified with the old secret finish with it. An
// invalid key is refused with an error that never contains its secret, and a key
// already set under its id stops working (fail closed: a Secret that was mis-edited
// no longer admits anyone).
func (r *Receiver) SetKey(k Key) error {
	if err := checkKey(k); err != nil {
		r.keys.remove(k.ID, false)
		return fmt.Errorf("receiver key %q: %w", k.ID, err)
	}
	kr := &r.keys
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if cur, ok := kr.byID[k.ID]; ok && bytes.Equal(cur.secret, k.Secret) && slices.Equal(cur.lookups, k.Namespaces) {
		return nil
	}
	state := kr.states[k.ID]
	if state == nil {
		state = kr.newState()
		kr.states[k.ID] = state
	}
	entry := &keyEntry{id: k.ID, secret: bytes.Clone(k.Secret), namespaces: map[string]bool{}, lookups: slices.Clone(k.Namespaces), state: state}
	for _, ns := range k.Namespaces {
		entry.namespaces[ns] = true
	}
	kr.byID[k.ID] = entry
	return nil
}

// DisableKey stops the namespaced key with that id, as SetKey does with an invalid
// key: its Secret exists but cannot be read as a key. It keeps the key's rate limiter
// and replay guard, so a mended key does not accept again what it accepted before.
func (r *Receiver) DisableKey(id string) { r.keys.remove(id, false) }

// RemoveKey forgets a namespaced key and everything its callers made the receiver
// hold: its Secret was deleted.
func (r *Receiver) RemoveKey(id string) { r.keys.remove(id, true) }

// remove stops the key with that id; with dropState also its rate limiter and replay
// guard (a key that was merely broken keeps them until it is mended or removed).
func (kr *keyring) remove(id string, dropState bool) {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	delete(kr.byID, id)
	if dropState {
		delete(kr.states, id)
	}
}

// keyIDs returns the ids of the namespaced keys in use, sorted (for tests).
func (r *Receiver) keyIDs() []string {
	kr := &r.keys
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	ids := make([]string, 0, len(kr.byID))
	for id := range kr.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// keyStates is how many key states the receiver holds (tests: bounded by the keys).
func (r *Receiver) keyStates() int {
	kr := &r.keys
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	return len(kr.states)
}
