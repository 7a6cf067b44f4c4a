package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// adoptWorkers is how many buckets adopt reads at once; the store's request budget
// (spec.requestsPerSecond) paces them together.
const adoptWorkers = 4

type adoptOptions struct {
	*options
	namespaceMap     string
	namespaceMapFile string
	defaultNamespace string
	dir              string
	storeTimeout     time.Duration
}

func newAdoptCommand(parent *options) *cobra.Command {
	o := &adoptOptions{options: parent}
	cmd := &cobra.Command{
		Use:   "adopt OBJECTSTORE --namespace-map PREFIX=NAMESPACE,... [--dir DIR]",
		Short: "Write StorageBucket manifests that adopt a store's unowned buckets as they are",
		Long: `adopt lists the buckets of an ObjectStore that no StorageBucket owns and writes, for
each, a StorageBucket that adopts it (spec.adoption: IfUnowned, spec.bucketName pinned
to its name, deletionPolicy Retain) with every setting found on the bucket in its spec:
versioning, lifecycle rules, tags, policy, public access, CORS, object lock and, where
the store has an admin API, its quota. Applied, the claims adopt the buckets without
changing them: the operator only adds its ownership tags. What a spec cannot say is
named in the manifest and on stderr.

Each bucket's namespace comes from the first --namespace-map (or --namespace-map-file)
rule that matches its name: a prefix, or a glob when the pattern has *, ? or [.
Buckets no rule maps go to --default-namespace, or are skipped and listed on stderr.
Buckets tagged as a claim's, another cluster's, of another account, or already named by
a StorageBucket are skipped too.

It reads the ObjectStore and its credentials Secret (and the admin API's), and only
reads from the store: the client refuses every write before it is sent. The store's
guardrails.adoptionAllowedNamespaces must select the namespaces for the claims to adopt.`,
		Example: `  kubectl bucketkeeper adopt objectstore/legacy --namespace-map 'team-a-=team-a,logs-*=observability' > adopted.yaml
  kubectl bucketkeeper adopt legacy --namespace-map-file map.txt --default-namespace platform --dir gitops/adopted`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(parent, kindObjectStore),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.namespaceMap, "namespace-map", "", "Rules PATTERN=NAMESPACE, comma-separated: a bucket goes to the namespace of the first rule whose pattern (a name prefix, or a glob with * ? [) matches")
	f.StringVar(&o.namespaceMapFile, "namespace-map-file", "", "A file of PATTERN=NAMESPACE rules, one a line (# comments), after those of --namespace-map")
	f.StringVar(&o.defaultNamespace, "default-namespace", "", "The namespace of buckets no rule maps (without it they are skipped)")
	f.StringVar(&o.dir, "dir", "", "Write one file per bucket, DIR/NAMESPACE/BUCKET.yaml, instead of YAML to stdout")
	f.DurationVar(&o.storeTimeout, "store-timeout", 30*time.Second, "Deadline of each request to the store")
	return cmd
}

func (o *adoptOptions) namespaces() (*namespaceMap, error) {
	m := &namespaceMap{defaultNS: o.defaultNamespace}
	rules, err := parseNamespaceRules(o.namespaceMap, "--namespace-map", false)
	if err != nil {
		return nil, err
	}
	m.rules = rules
	if o.namespaceMapFile != "" {
		data, err := os.ReadFile(o.namespaceMapFile)
		if err != nil {
			return nil, err
		}
		more, err := parseNamespaceRules(string(data), o.namespaceMapFile, true)
		if err != nil {
			return nil, err
		}
		m.rules = append(m.rules, more...)
	}
	if o.defaultNamespace != "" {
		if _, err := parseNamespaceRules("*="+o.defaultNamespace, "--default-namespace", false); err != nil {
			return nil, err
		}
	}
	if m.empty() {
		return nil, errors.New("say where the claims go: --namespace-map, --namespace-map-file or --default-namespace")
	}
	return m, nil
}

func (o *adoptOptions) run(ctx context.Context, arg string) error {
	if o.storeTimeout <= 0 {
		return errors.New("--store-timeout must be positive")
	}
	nsMap, err := o.namespaces()
	if err != nil {
		return err
	}
	t, err := parseTarget(arg, "", kindObjectStore, kindObjectStore)
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	store := &bkv1.ObjectStore{}
	if err := get(ctx, c, t, store); err != nil {
		return err
	}
	v := &storeView{store: store, nsMap: nsMap}
	if v.s3, err = storeClient(ctx, c, store, o.storeTimeout); err != nil {
		return err
	}
	if v.quotas, err = quotaReader(ctx, c, store, o.storeTimeout); err != nil {
		return err
	}
	if v.claimed, err = claimedBuckets(ctx, c, store.Name); err != nil {
		return err
	}
	names, err := v.s3.ListBuckets(ctx)
	if err != nil {
		return fmt.Errorf("listing the buckets of ObjectStore %s: %w", store.Name, err)
	}
	v.ownerOnce = sync.OnceValues(func() (string, error) {
		if owner := store.Spec.Guardrails.AdoptionBucketOwner; owner != "" {
			return owner, nil
		}
		owner, err := v.s3.CallerOwner(ctx)
		if err != nil {
			return "", fmt.Errorf("reading whom ObjectStore %s names as its buckets' owner: %w", store.Name, err)
		}
		return owner, nil
	})
	found := readBuckets(ctx, v, names)
	if err := o.write(store, found); err != nil {
		return err
	}
	return o.summarize(store, found)
}

// claimedBuckets maps the bucket names StorageBuckets on the store name (spec or
// status) to the claim; empty when the caller may not list every namespace.
func claimedBuckets(ctx context.Context, c client.Client, store string) (map[string]string, error) {
	out := map[string]string{}
	list := &bkv1.StorageBucketList{}
	if err := c.List(ctx, list); apierrors.IsForbidden(err) {
		return out, nil
	} else if err != nil {
		return nil, err
	}
	for _, sb := range list.Items {
		if sb.HomeStore() != store && sb.Spec.ObjectStoreRef.Name != store {
			continue
		}
		for _, name := range []string{sb.Spec.BucketName, sb.Status.BucketName} {
			if name != "" {
				out[name] = sb.Namespace + "/" + sb.Name
			}
		}
	}
	return out, nil
}

// readBuckets reads the buckets, adoptWorkers at a time, in the order of names.
func readBuckets(ctx context.Context, v *storeView, names []string) []*bucketRead {
	sort.Strings(names)
	out := make([]*bucketRead, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(adoptWorkers, len(names)) {
		wg.Go(func() {
			for i := range next {
				out[i] = v.readBucket(ctx, names[i])
			}
		})
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// manifest is a bucket's StorageBucket as YAML, after a comment saying where it came
// from and what it cannot declare.
func manifest(store *bkv1.ObjectStore, b *bucketRead) ([]byte, error) {
	spec, err := json.Marshal(b.spec)
	if err != nil {
		return nil, err
	}
	var specMap map[string]any
	if err := json.Unmarshal(spec, &specMap); err != nil {
		return nil, err
	}
	for k, v := range specMap {
		if m, ok := v.(map[string]any); ok && len(m) == 0 {
			delete(specMap, k) // probe: {}, connectionSecret: {}: the defaults
		}
	}
	obj := map[string]any{
		"apiVersion": bkv1.GroupVersion.String(),
		"kind":       "StorageBucket",
		"metadata":   map[string]any{"name": b.name, "namespace": b.namespace},
		"spec":       specMap,
	}
	body, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var head strings.Builder
	fmt.Fprintf(&head, "# Bucket %s of ObjectStore %s, adopted as it is (namespace by %s).\n", b.name, store.Name, b.rule)
	for _, n := range b.notes {
		fmt.Fprintf(&head, "# Note: %s.\n", n)
	}
	return append([]byte(head.String()), body...), nil
}

// write prints the manifests to stdout, or into one file per bucket under --dir.
func (o *adoptOptions) write(store *bkv1.ObjectStore, found []*bucketRead) error {
	first := true
	for _, b := range found {
		if b.skip != "" {
			continue
		}
		m, err := manifest(store, b)
		if err != nil {
			return fmt.Errorf("bucket %s: %w", b.name, err)
		}
		if o.dir == "" {
			if !first {
				if _, err := io.WriteString(o.streams.Out, "---\n"); err != nil {
					return err
				}
			}
			first = false
			if _, err := o.streams.Out.Write(m); err != nil {
				return err
			}
			continue
		}
		dir := filepath.Join(o.dir, b.namespace)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, b.name+".yaml"), m, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// summarize says on stderr what was written, what was skipped and why, and the notes;
// a bucket that could not be read makes the exit code 1.
func (o *adoptOptions) summarize(store *bkv1.ObjectStore, found []*bucketRead) error {
	w := o.streams.ErrOut
	written, namespaces, failed := 0, map[string]bool{}, 0
	var skipped []string
	for _, b := range found {
		switch {
		case b.skip != "":
			skipped = append(skipped, fmt.Sprintf("  %s: %s", b.name, b.skip))
			if b.failed {
				failed++
			}
		default:
			written++
			namespaces[b.namespace] = true
		}
	}
	where := "stdout"
	if o.dir != "" {
		where = o.dir
	}
	fmt.Fprintf(w, "ObjectStore %s: %d buckets; %d StorageBuckets written to %s, in %d namespaces; %d buckets skipped.\n",
		store.Name, len(found), written, where, len(namespaces), len(skipped))
	if len(skipped) > 0 {
		fmt.Fprintln(w, "Skipped:")
		fmt.Fprintln(w, strings.Join(skipped, "\n"))
	}
	for _, b := range found {
		for _, n := range b.notes {
			fmt.Fprintf(w, "Note on %s: %s.\n", b.name, n)
		}
	}
	if written > 0 && store.Spec.Guardrails.AdoptionAllowedNamespaces == nil {
		fmt.Fprintf(w, "ObjectStore %s allows no adoption yet: set its guardrails.adoptionAllowedNamespaces to select %s before applying.\n",
			store.Name, strings.Join(slices.Sorted(maps.Keys(namespaces)), ", "))
	}
	if failed > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d buckets could not be read; run adopt again once the store answers", failed)}
	}
	return nil
}
