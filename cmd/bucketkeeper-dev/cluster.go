package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
)

const (
	systemNamespace = "bucketkeeper-system"
	credentialsName = "local-store-credentials"
	storeName       = "local"
	fieldOwner      = "bucketkeeper-dev"
)

// bootstrap creates what the embedded store needs in the cluster: the namespace,
// the credentials Secret and the ObjectStore "local" (the sample ObjectStore's
// settings, pointed at the embedded server, checked every 10s, with the embedded
// IAM service as its access provider, so a StorageBucket's spec.access gets a key
// of its own). Both are updated in place on a warm start, so the same buckets stay
// bound to the same store.
func bootstrap(ctx context.Context, c client.Client, s *embeddedStore) error {
	if err := ensureNamespace(ctx, c, systemNamespace); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: credentialsName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, secret, func() error {
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		// The manager caches only Secrets with this label.
		secret.Labels[bkv1.LabelSecretRole] = bkv1.SecretRoleCredentials
		secret.Data = map[string][]byte{
			bkv1.CredentialsKeyAccessKeyID:     []byte(s.AccessKeyID),
			bkv1.CredentialsKeySecretAccessKey: []byte(s.SecretAccessKey),
		}
		return nil
	}); err != nil {
		return fmt.Errorf("credentials Secret: %w", err)
	}
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: storeName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, store, func() error {
		store.Spec = bkv1.ObjectStoreSpec{
			Endpoint:             s.Endpoint,
			Region:               s.Region,
			ForcePathStyle:       true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: systemNamespace, Name: credentialsName},
			AllowedNamespaces:    &metav1.LabelSelector{},
			BucketNamePrefix:     "dev",
			HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 10 * time.Second}},
			RequestsPerSecond:    50,
			Burst:                100,
			AccessProvider: &bkv1.AccessProvider{
				Type: bkv1.AccessProviderIAM,
				// Versity's IAM service signs for us-east-1 whatever the S3 region.
				IAM: &bkv1.IAMAccessProvider{Endpoint: s.IAMEndpoint, Region: iam.DefaultRegion},
			},
		}
		return nil
	}); err != nil {
		return fmt.Errorf("ObjectStore %s: %w", storeName, err)
	}
	return nil
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}

// sampleSet is the StorageBuckets read from the samples.
type sampleSet struct {
	buckets []*unstructured.Unstructured
	notes   []string // what was skipped and why
}

// accessKeys returns the keys of the samples that ask for a key of their own
// (spec.access ReadWrite or ReadOnly): each gets an implicit BucketAccess of the
// same name.
func (s *sampleSet) accessKeys() []types.NamespacedName {
	var out []types.NamespacedName
	for _, u := range s.buckets {
		access, _, _ := unstructured.NestedString(u.Object, "spec", "access")
		if access == string(bkv1.AccessReadWrite) || access == string(bkv1.AccessReadOnly) {
			out = append(out, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()})
		}
	}
	return out
}

// keys returns the samples' namespace/name keys.
func (s *sampleSet) keys() []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(s.buckets))
	for _, u := range s.buckets {
		out = append(out, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()})
	}
	return out
}

// readSamples reads every StorageBucket from path: a YAML file, or every *.yaml and
// *.yml file directly in a directory. The sample ObjectStore is skipped, since the
// one pointing at the embedded server replaces it; other kinds are skipped because
// the dev cluster runs no controller for them.
func readSamples(path string) (*sampleSet, error) {
	files := []string{path}
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if fi.IsDir() {
		files = nil
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, _ := filepath.Glob(filepath.Join(path, pat))
			files = append(files, m...)
		}
		sort.Strings(files)
	}
	set := &sampleSet{}
	for _, f := range files {
		if err := set.readFile(f); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	if len(set.buckets) == 0 {
		return nil, fmt.Errorf("no StorageBucket in %s", path)
	}
	return set, nil
}

func (s *sampleSet) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(u.Object) == 0 {
			continue // an empty document between two ---
		}
		gv := u.GroupVersionKind()
		switch {
		case gv.Group == bkv1.GroupVersion.Group && gv.Kind == "StorageBucket":
			if u.GetNamespace() == "" {
				u.SetNamespace("default")
			}
			s.buckets = append(s.buckets, u)
		case gv.Group == bkv1.GroupVersion.Group && gv.Kind == "ObjectStore":
			s.notes = append(s.notes, fmt.Sprintf("skipped ObjectStore %s in %s: the embedded store's ObjectStore %q replaces it", u.GetName(), filepath.Base(path), storeName))
		default:
			s.notes = append(s.notes, fmt.Sprintf("skipped %s %s in %s: only StorageBuckets are applied", gv.Kind, u.GetName(), filepath.Base(path)))
		}
	}
}

// apply server-side-applies every sample with the probe-request annotation set to
// token, creating the namespaces they need first. The annotation is the operator's
// documented "probe now": on a warm start it makes the operator probe each sample
// at once, and status.lastHandledProbeRequest == token then proves that Ready and
// Available were decided by this run and are not left over from the last one.
func (s *sampleSet) apply(ctx context.Context, c client.Client, token string) error {
	seen := map[string]bool{}
	for _, u := range s.buckets {
		if ns := u.GetNamespace(); !seen[ns] {
			seen[ns] = true
			if err := ensureNamespace(ctx, c, ns); err != nil {
				return err
			}
		}
		obj := u.DeepCopy()
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[bkv1.AnnotationProbeRequestedAt] = token
		obj.SetAnnotations(ann)
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying StorageBucket %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// describeNotReady lists, for every sample that is not ready, its conditions and
// whether this run's probe request was handled, and for every sample whose key is
// not issued, its BucketAccess's conditions: what --exit-when-ready prints when it
// gives up.
func describeNotReady(ctx context.Context, c client.Client, keys, withAccess []types.NamespacedName, token string) string {
	var b strings.Builder
	for _, key := range keys {
		sb := &bkv1.StorageBucket{}
		if err := c.Get(ctx, key, sb); err != nil {
			fmt.Fprintf(&b, "  %s: %v\n", key, err)
			continue
		}
		if sampleReady(sb, token) {
			continue
		}
		fmt.Fprintf(&b, "  %s (bucket %q):\n", key, sb.Status.BucketName)
		for _, cond := range sb.Status.Conditions {
			fmt.Fprintf(&b, "    %-12s %-7s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
		if sb.Status.LastHandledProbeRequest != token {
			fmt.Fprintf(&b, "    this run's probe request (%s) has not been handled yet\n", token)
		}
	}
	for _, key := range withAccess {
		ba := &bkv1.BucketAccess{}
		if err := c.Get(ctx, key, ba); err != nil {
			fmt.Fprintf(&b, "  BucketAccess %s: %v\n", key, err)
			continue
		}
		if accessReady(ba) {
			continue
		}
		fmt.Fprintf(&b, "  BucketAccess %s (Secret %q):\n", key, ba.Spec.SecretName)
		for _, cond := range ba.Status.Conditions {
			fmt.Fprintf(&b, "    %-12s %-7s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	return b.String()
}
