package main

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// kind is one of the API's kinds, as a verb's argument names it.
type kind string

const (
	kindStorageBucket kind = "StorageBucket"
	kindBucketAccess  kind = "BucketAccess"
	kindObjectStore   kind = "ObjectStore"
)

// kindNames maps every way kubectl spells a kind (plural, singular, short name, with
// the group) to the kind.
var kindNames = map[string]kind{}

func init() {
	for k, names := range map[kind][]string{
		kindStorageBucket: {"storagebucket", "storagebuckets", "sb"},
		kindBucketAccess:  {"bucketaccess", "bucketaccesses", "ba"},
		kindObjectStore:   {"objectstore", "objectstores", "ostore"},
	} {
		for _, n := range names {
			kindNames[n] = k
			if n != "sb" && n != "ba" && n != "ostore" {
				kindNames[n+"."+bkv1.GroupVersion.Group] = k
			}
		}
	}
}

// target is an object a verb is about.
type target struct {
	kind      kind
	namespace string // "" for an ObjectStore
	name      string
}

func (t target) String() string {
	if t.namespace == "" {
		return string(t.kind) + " " + t.name
	}
	return string(t.kind) + " " + t.namespace + "/" + t.name
}

// parseTarget reads "name" (a StorageBucket, or def) or "kind/name", where kind is
// any spelling kubectl accepts; allowed lists the kinds the verb takes.
func parseTarget(arg, namespace string, def kind, allowed ...kind) (target, error) {
	k, name := def, arg
	if prefix, rest, ok := strings.Cut(arg, "/"); ok {
		known, found := kindNames[strings.ToLower(prefix)]
		if !found {
			return target{}, fmt.Errorf("%q: unknown kind %q; use storagebucket/NAME, bucketaccess/NAME or objectstore/NAME", arg, prefix)
		}
		k, name = known, rest
	}
	if name == "" || strings.Contains(name, "/") {
		return target{}, fmt.Errorf("%q: want NAME or KIND/NAME", arg)
	}
	ok := false
	for _, a := range allowed {
		ok = ok || a == k
	}
	if !ok {
		return target{}, fmt.Errorf("%q: this command takes %s, not %s", arg, kindList(allowed), k)
	}
	t := target{kind: k, name: name}
	if k != kindObjectStore {
		t.namespace = namespace
	}
	return t, nil
}

func kindList(kinds []kind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = "a " + string(k)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// target reads a verb's argument: the object it names (in the namespace of the
// flags), and the client to read it with.
func (o *options) target(arg string, def kind, allowed ...kind) (client.Client, target, error) {
	c, err := o.client()
	if err != nil {
		return nil, target{}, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, target{}, err
	}
	t, err := parseTarget(arg, ns, def, allowed...)
	return c, t, err
}

// get reads the target into obj; a missing object is an error that names it.
func get(ctx context.Context, c client.Client, t target, obj client.Object) error {
	err := c.Get(ctx, types.NamespacedName{Namespace: t.namespace, Name: t.name}, obj)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s not found", t)
	}
	return err
}

// newObject returns an empty object of the target's kind.
func newObject(k kind) client.Object {
	switch k {
	case kindBucketAccess:
		return &bkv1.BucketAccess{}
	case kindObjectStore:
		return &bkv1.ObjectStore{}
	default:
		return &bkv1.StorageBucket{}
	}
}
