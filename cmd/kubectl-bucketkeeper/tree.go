package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// node is one object of a claim's story, as tree prints it (and -o json|yaml writes it).
type node struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Found is false for an object the claim names that does not exist; Unreadable
	// says why it could not be read instead (e.g. forbidden).
	Found      bool         `json:"found"`
	Unreadable string       `json:"unreadable,omitempty"`
	Created    *metav1.Time `json:"created,omitempty"`
	// Status, Reason and Message summarise the node: the Ready condition of an
	// object, the Available condition of the bucket, Present or Missing for a Secret.
	Status     string             `json:"status"`
	Reason     string             `json:"reason,omitempty"`
	Message    string             `json:"message,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Details    details            `json:"details,omitempty"`
	Children   []*node            `json:"children,omitempty"`
	// summary is the condition type Status summarises.
	summary string
}

// details are a node's facts in the order they are printed (a JSON object).
type details []detail

type detail struct{ key, value string }

func (d *details) add(key, value string) {
	if value != "" {
		*d = append(*d, detail{key, value})
	}
}

// UnmarshalJSON reads details back (in key order: JSON objects have none).
func (d *details) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	*d = nil
	for _, k := range keys {
		d.add(k, m[k])
	}
	return nil
}

func (d details) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteString("{")
	for i, kv := range d {
		k, _ := json.Marshal(kv.key)
		v, _ := json.Marshal(kv.value)
		if i > 0 {
			b.WriteString(",")
		}
		b.Write(k)
		b.WriteString(":")
		b.Write(v)
	}
	b.WriteString("}")
	return []byte(b.String()), nil
}

func newTreeCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tree [STORAGEBUCKET]",
		Short: "Show a StorageBucket with its ObjectStore, bucket, Secrets and BucketAccesses",
		Long: `tree shows a StorageBucket and everything it involves: its ObjectStore (and whether
the namespace may use it), the bucket on the store, its connection Secret, and every
BucketAccess that grants it with the access's Secret, each with its conditions, reason
and age. Without a name it shows every StorageBucket of the namespace (-A: of the
cluster). Secrets are shown by their key names, never their values.`,
		Example: `  kubectl bucketkeeper tree photos
  kubectl bucketkeeper tree -A -o yaml`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeNames(o, kindStorageBucket),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			trees, err := o.trees(cmd.Context(), args)
			if err != nil {
				return err
			}
			if o.output != "" {
				if len(args) == 1 {
					return printStructured(o.streams.Out, o.output, trees[0])
				}
				return printStructured(o.streams.Out, o.output, map[string]any{"items": trees})
			}
			if len(trees) == 0 {
				fmt.Fprintln(o.streams.ErrOut, "No StorageBuckets found.")
				return nil
			}
			return o.printTrees(trees)
		},
	}
	o.addListFlags(cmd)
	return cmd
}

// trees builds the tree of the named StorageBucket, or of every one the listing
// covers.
func (o *options) trees(ctx context.Context, args []string) ([]*node, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	var claims []bkv1.StorageBucket
	if len(args) == 1 {
		_, t, err := o.target(args[0], kindStorageBucket, kindStorageBucket)
		if err != nil {
			return nil, err
		}
		sb := &bkv1.StorageBucket{}
		if err := get(ctx, c, t, sb); err != nil {
			return nil, err
		}
		claims = append(claims, *sb)
	} else {
		ns, err := o.listNamespace()
		if err != nil {
			return nil, err
		}
		list := &bkv1.StorageBucketList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		claims = list.Items
		sort.Slice(claims, func(i, j int) bool {
			return claims[i].Namespace+"/"+claims[i].Name < claims[j].Namespace+"/"+claims[j].Name
		})
	}
	r := newReader(c)
	out := make([]*node, 0, len(claims))
	for i := range claims {
		n, err := r.claimTree(ctx, &claims[i])
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// reader reads what the trees need once per store, namespace and namespace's accesses.
type reader struct {
	c client.Client
	// objects holds each object read (nil when the read failed, with its error).
	objects  map[string]readResult
	accesses map[string][]bkv1.BucketAccess
}

type readResult struct {
	obj client.Object
	err error
}

func newReader(c client.Client) *reader {
	return &reader{c: c, objects: map[string]readResult{}, accesses: map[string][]bkv1.BucketAccess{}}
}

// read returns the object named name of fresh's type, read once.
func (r *reader) read(ctx context.Context, name string, fresh client.Object) (client.Object, error) {
	key := fmt.Sprintf("%T/%s", fresh, name)
	if res, ok := r.objects[key]; ok {
		return res.obj, res.err
	}
	res := readResult{obj: fresh, err: r.c.Get(ctx, types.NamespacedName{Name: name}, fresh)}
	if res.err != nil {
		res.obj = nil
	}
	r.objects[key] = res
	return res.obj, res.err
}

func (r *reader) store(ctx context.Context, name string) (*bkv1.ObjectStore, error) {
	obj, err := r.read(ctx, name, &bkv1.ObjectStore{})
	if err != nil {
		return nil, err
	}
	return obj.(*bkv1.ObjectStore), nil
}

func (r *reader) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	obj, err := r.read(ctx, name, &corev1.Namespace{})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Namespace), nil
}

// accessesOf returns the BucketAccesses of sb's namespace that grant it.
func (r *reader) accessesOf(ctx context.Context, sb *bkv1.StorageBucket) ([]bkv1.BucketAccess, error) {
	all, ok := r.accesses[sb.Namespace]
	if !ok {
		list := &bkv1.BucketAccessList{}
		if err := r.c.List(ctx, list, client.InNamespace(sb.Namespace)); err != nil {
			return nil, err
		}
		all = list.Items
		sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
		r.accesses[sb.Namespace] = all
	}
	var out []bkv1.BucketAccess
	for _, ba := range all {
		if slices.ContainsFunc(ba.Spec.Buckets, func(g bkv1.BucketGrant) bool { return g.Name == sb.Name }) {
			out = append(out, ba)
		}
	}
	return out, nil
}

// claimTree is the tree of one StorageBucket.
func (r *reader) claimTree(ctx context.Context, sb *bkv1.StorageBucket) (*node, error) {
	root := objectNode("StorageBucket", sb.Namespace, sb.Name, &sb.CreationTimestamp, sb.Status.Conditions, bkv1.ConditionReady)
	root.Details.add("deletionPolicy", string(orDefault(sb.Spec.DeletionPolicy, bkv1.DeletionPolicyRetain)))
	root.Details.add("access", sb.Spec.Access)
	if sb.Spec.Suspend {
		root.Details.add("suspended", "true")
	}
	if sb.DeletionTimestamp != nil {
		root.Details.add("deleting", "since "+sb.DeletionTimestamp.UTC().Format("2006-01-02 15:04:05Z"))
	}
	if sb.Status.ObservedGeneration != sb.Generation && len(sb.Status.Conditions) > 0 {
		root.Details.add("pending", fmt.Sprintf("the operator has not answered generation %d yet (last: %d)", sb.Generation, sb.Status.ObservedGeneration))
	}
	if len(sb.Status.Conditions) == 0 {
		root.Status, root.Message = "-", "no status yet: the operator has not seen this claim (is it running and watching this namespace?)"
	}

	root.Children = append(root.Children, r.storeNode(ctx, sb), bucketNode(sb))
	root.Children = append(root.Children, r.secretNode(ctx, sb.Namespace, connectionSecretName(sb), "the operator writes it once the bucket is provisioned"))
	accesses, err := r.accessesOf(ctx, sb)
	if err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, err
		}
		root.Details.add("bucketAccesses", "cannot list: "+err.Error())
	}
	for i := range accesses {
		ba := &accesses[i]
		an := objectNode("BucketAccess", ba.Namespace, ba.Name, &ba.CreationTimestamp, ba.Status.Conditions, bkv1.ConditionReady)
		for _, g := range ba.Spec.Buckets {
			if g.Name == sb.Name {
				an.Details.add("mode", string(orDefault(g.Mode, bkv1.AccessReadWrite)))
			}
		}
		if len(ba.Spec.Buckets) > 1 {
			an.Details.add("grants", fmt.Sprintf("%d StorageBuckets", len(ba.Spec.Buckets)))
		}
		an.Details.add("key", ba.Status.AccessKeyID)
		if ba.Status.Rotation.State != "" && ba.Status.Rotation.State != bkv1.RotationIdle {
			an.Details.add("rotation", string(ba.Status.Rotation.State))
		}
		an.Children = append(an.Children, r.secretNode(ctx, ba.Namespace, ba.Spec.SecretName, "the operator writes it once the key is issued"))
		root.Children = append(root.Children, an)
	}
	return root, nil
}

// objectNode is a node for an object with conditions, summarised by the condition
// summary.
func objectNode(kind, namespace, name string, created *metav1.Time, conds []metav1.Condition, summary string) *node {
	n := &node{Kind: kind, Namespace: namespace, Name: name, Found: true, Created: created, Conditions: conds, Status: "-", summary: summary}
	if c := apimeta.FindStatusCondition(conds, summary); c != nil {
		n.Status, n.Reason, n.Message = string(c.Status), c.Reason, c.Message
	}
	return n
}

func (r *reader) storeNode(ctx context.Context, sb *bkv1.StorageBucket) *node {
	name := sb.HomeStore()
	store, err := r.store(ctx, name)
	if err != nil {
		n := &node{Kind: "ObjectStore", Name: name, Status: "missing"}
		if apierrors.IsNotFound(err) {
			n.Message = "not found"
		} else {
			n.Unreadable, n.Status, n.Message = err.Error(), "-", "cannot read: "+err.Error()
		}
		if allowed := namespaceVerdictFromClaim(sb); allowed != "" {
			n.Details.add("namespace", allowed)
		}
		return n
	}
	n := objectNode("ObjectStore", "", name, &store.CreationTimestamp, store.Status.Conditions, bkv1.ConditionReady)
	n.Details.add("namespace", r.namespaceVerdict(ctx, store, sb))
	n.Details.add("endpoint", orDefault(store.Spec.Endpoint, "AWS S3"))
	n.Details.add("accessProvider", string(store.Spec.AccessProviderType()))
	return n
}

// namespaceVerdict says whether sb's namespace may use the store: from the store's
// selector and the namespace's labels when both can be read, else from the claim's
// conditions.
func (r *reader) namespaceVerdict(ctx context.Context, store *bkv1.ObjectStore, sb *bkv1.StorageBucket) string {
	if store.Spec.AllowedNamespaces == nil {
		return sb.Namespace + " allowed (the store allows every namespace)"
	}
	sel, err := metav1.LabelSelectorAsSelector(store.Spec.AllowedNamespaces)
	if err != nil {
		return "the store's spec.allowedNamespaces is not a valid selector: " + err.Error()
	}
	ns, err := r.namespace(ctx, sb.Namespace)
	if err != nil {
		if v := namespaceVerdictFromClaim(sb); v != "" {
			return v
		}
		return "unknown: cannot read namespace " + sb.Namespace
	}
	if sel.Matches(labels.Set(ns.Labels)) {
		return sb.Namespace + " allowed by spec.allowedNamespaces (" + sel.String() + ")"
	}
	return sb.Namespace + " NOT allowed: spec.allowedNamespaces (" + sel.String() + ") does not select it"
}

// namespaceVerdictFromClaim reads the store's verdict on the namespace from the
// claim's conditions ("" when they do not say).
func namespaceVerdictFromClaim(sb *bkv1.StorageBucket) string {
	for _, c := range sb.Status.Conditions {
		if c.Reason == bkv1.ReasonNamespaceNotAllowed {
			return sb.Namespace + " NOT allowed (" + c.Message + ")"
		}
	}
	if apimeta.IsStatusConditionTrue(sb.Status.Conditions, bkv1.ConditionProvisioned) {
		return sb.Namespace + " allowed (the bucket is provisioned)"
	}
	return ""
}

// bucketNode is the bucket on the store, as the claim's status knows it.
func bucketNode(sb *bkv1.StorageBucket) *node {
	n := &node{Kind: "Bucket", Name: sb.Status.BucketName, Found: sb.Status.BucketName != "", Status: "-"}
	n.summary = bkv1.ConditionAvailable
	if !n.Found {
		n.summary = bkv1.ConditionProvisioned
	}
	if c := apimeta.FindStatusCondition(sb.Status.Conditions, n.summary); c != nil {
		n.Status, n.Reason, n.Message = string(c.Status), c.Reason, c.Message
	}
	if !n.Found {
		n.Name, n.Message = "-", "not provisioned yet"
	} else if c := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionProvisioned); c != nil {
		n.Created = &c.LastTransitionTime // the bucket's age, as far as the claim knows it
	}
	for _, typ := range []string{bkv1.ConditionProvisioned, bkv1.ConditionConfigured, bkv1.ConditionAvailable} {
		if c := apimeta.FindStatusCondition(sb.Status.Conditions, typ); c != nil {
			n.Conditions = append(n.Conditions, *c)
		}
	}
	n.Details.add("region", sb.Status.Region)
	n.Details.add("endpoint", sb.Status.Endpoint)
	if sb.Status.LastProbeTime != nil {
		probe := sb.Status.LastProbeTime.UTC().Format("2006-01-02 15:04:05Z")
		if sb.Status.LastProbeLatency != nil {
			probe += " in " + sb.Status.LastProbeLatency.Duration.String()
		}
		n.Details.add("lastProbe", probe)
	}
	if u := sb.Status.Usage; u != nil {
		n.Details.add("usage", fmt.Sprintf("%s in %d objects (%s, measured %s)", bytesOf(u.Bytes), u.Objects, u.Figure, u.MeasuredAt.UTC().Format("2006-01-02 15:04:05Z")))
	}
	if q := sb.Spec.Quota; q != nil {
		n.Details.add("quota", quotaString(q))
	}
	return n
}

// secretNode shows a Secret by its key names: its values are never read out.
func (r *reader) secretNode(ctx context.Context, namespace, name, whenMissing string) *node {
	n := &node{Kind: "Secret", Namespace: namespace, Name: name}
	s := &corev1.Secret{}
	err := r.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		n.Status, n.Reason, n.Message = "missing", "NotFound", "not found: "+whenMissing
	case err != nil:
		n.Unreadable, n.Status, n.Message = err.Error(), "-", "cannot read: "+err.Error()
	default:
		n.Found, n.Created, n.Status = true, &s.CreationTimestamp, "present"
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		n.Message = fmt.Sprintf("%d keys: %s", len(keys), strings.Join(keys, ", "))
	}
	return n
}

// connectionSecretName is the claim's connection Secret: the one its status names,
// else the one its spec asks for, else the default.
func connectionSecretName(sb *bkv1.StorageBucket) string {
	switch {
	case sb.Status.ConnectionSecretName != "":
		return sb.Status.ConnectionSecretName
	case sb.Spec.ConnectionSecret.Name != "":
		return sb.Spec.ConnectionSecret.Name
	}
	return sb.Name + "-bucket"
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}
