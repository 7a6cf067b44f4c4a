package main

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// completionTimeout bounds the API requests of one completion: a shell waits for it.
const completionTimeout = 5 * time.Second

// completeNames completes a verb's one object argument: names of the first kind,
// and KIND/NAME for every kind once the word has a slash (or another kind is typed).
func completeNames(o *options, kinds ...kind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		var out []string
		if prefix, _, ok := strings.Cut(toComplete, "/"); ok {
			k, known := kindNames[strings.ToLower(prefix)]
			if !known || !contains(kinds, k) {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, n := range o.names(ctx, k) {
				out = append(out, prefix+"/"+n)
			}
		} else {
			out = o.names(ctx, kinds[0])
			if len(kinds) > 1 {
				for _, k := range kinds[1:] {
					out = append(out, strings.ToLower(string(k))+"/")
				}
			}
		}
		var matching []string
		for _, s := range out {
			if strings.HasPrefix(s, toComplete) {
				matching = append(matching, s)
			}
		}
		directive := cobra.ShellCompDirectiveNoFileComp
		if len(matching) == 1 && strings.HasSuffix(matching[0], "/") {
			directive |= cobra.ShellCompDirectiveNoSpace
		}
		return matching, directive
	}
}

// names lists the objects of kind k in the namespace of the flags; nothing on error
// (a completion has nowhere to say it).
func (o *options) names(ctx context.Context, k kind) []string {
	c, err := o.client()
	if err != nil {
		return nil
	}
	var list client.ObjectList
	switch k {
	case kindStorageBucket:
		list = &bkv1.StorageBucketList{}
	case kindBucketAccess:
		list = &bkv1.BucketAccessList{}
	default:
		list = &bkv1.ObjectStoreList{}
	}
	var opts []client.ListOption
	if k != kindObjectStore {
		ns, err := o.namespace()
		if err != nil {
			return nil
		}
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil
	}
	return objectNames(list)
}

func objectNames(list client.ObjectList) []string {
	var out []string
	switch l := list.(type) {
	case *bkv1.StorageBucketList:
		for _, i := range l.Items {
			out = append(out, i.Name)
		}
	case *bkv1.BucketAccessList:
		for _, i := range l.Items {
			out = append(out, i.Name)
		}
	case *bkv1.ObjectStoreList:
		for _, i := range l.Items {
			out = append(out, i.Name)
		}
	case *corev1.NamespaceList:
		for _, i := range l.Items {
			out = append(out, i.Name)
		}
	}
	sort.Strings(out)
	return out
}

// registerFlagCompletions completes the flags whose values the cluster or the
// kubeconfig knows: -n, --context, --cluster, --user, and -o.
func registerFlagCompletions(o *options, root *cobra.Command) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		c, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		list := &corev1.NamespaceList{}
		if err := c.List(ctx, list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return objectNames(list), cobra.ShellCompDirectiveNoFileComp
	})
	fromKubeconfig := func(pick func(contexts, clusters, users []string) []string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			raw, err := o.config.ToRawKubeConfigLoader().RawConfig()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var contexts, clusters, users []string
			for n := range raw.Contexts {
				contexts = append(contexts, n)
			}
			for n := range raw.Clusters {
				clusters = append(clusters, n)
			}
			for n := range raw.AuthInfos {
				users = append(users, n)
			}
			out := pick(contexts, clusters, users)
			sort.Strings(out)
			return out, cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = root.RegisterFlagCompletionFunc("context", fromKubeconfig(func(c, _, _ []string) []string { return c }))
	_ = root.RegisterFlagCompletionFunc("cluster", fromKubeconfig(func(_, c, _ []string) []string { return c }))
	_ = root.RegisterFlagCompletionFunc("user", fromKubeconfig(func(_, _, u []string) []string { return u }))
	for _, cmd := range root.Commands() {
		if cmd.Flags().Lookup("output") != nil {
			_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
		}
	}
}

func contains(kinds []kind, k kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}
