package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// maxExamples is how many objects status names per group.
const maxExamples = 3

// storeStatus is what status reports about one ObjectStore.
type storeStatus struct {
	Name           string             `json:"name"`
	Endpoint       string             `json:"endpoint"`
	Region         string             `json:"region,omitempty"`
	AccessProvider string             `json:"accessProvider"`
	Conditions     []metav1.Condition `json:"conditions,omitempty"`
	// Scope is what was counted: "cluster", or one namespace when the caller may not
	// list StorageBuckets in every namespace.
	Scope    string       `json:"scope"`
	Buckets  []group      `json:"buckets"`
	Accesses []group      `json:"accesses"`
	Totals   storeTotals  `json:"totals"`
	Quota    *quotaReport `json:"quota,omitempty"`
	// Retirement is set while the store retires (spec.retire) or keeps the counts of
	// one (retirement.go).
	Retirement *retirementReport `json:"retirement,omitempty"`
}

// group counts the objects that share a verdict.
type group struct {
	Ready           string   `json:"ready"`
	Reason          string   `json:"reason,omitempty"`
	Available       string   `json:"available,omitempty"`
	AvailableReason string   `json:"availableReason,omitempty"`
	Count           int      `json:"count"`
	Examples        []string `json:"examples"`
}

type storeTotals struct {
	Buckets int `json:"buckets"`
	// Accesses are the BucketAccesses on the store; Keys those holding a key now, and
	// Rotating those in a rotation.
	Accesses int `json:"accesses"`
	Keys     int `json:"keys"`
	Rotating int `json:"rotating"`
	// UsageBytes and UsageObjects add up the buckets' last measured usage;
	// MeasuredBuckets says how many buckets have one.
	UsageBytes      int64 `json:"usageBytes"`
	UsageObjects    int64 `json:"usageObjects"`
	MeasuredBuckets int   `json:"measuredBuckets"`
}

// quotaReport is the store's quota guardrails and the quotas its buckets ask for.
type quotaReport struct {
	Default *bkv1.BucketQuota `json:"default,omitempty"`
	Max     *bkv1.BucketQuota `json:"max,omitempty"`
	// Buckets with a quota of their own, and the sums of their limits.
	Buckets       int                `json:"buckets"`
	MaxSizeSum    *resource.Quantity `json:"maxSizeSum,omitempty"`
	MaxObjectsSum int64              `json:"maxObjectsSum,omitempty"`
}

func newStatusCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status OBJECTSTORE",
		Short: "Show an ObjectStore: its buckets by condition, its keys, its quota and usage",
		Long: `status shows an ObjectStore's conditions, its StorageBuckets grouped by their Ready
and Available verdicts (with examples), the BucketAccesses and keys on it, the quota
guardrails and the quotas its buckets ask for, and the usage its buckets last measured.
A retiring store (spec.retire) shows its retirement: the buckets moved, moving, queued,
skipped (and why) and not started, counted from the claims listed in the same call
(or, when you may not list every namespace, as the store last counted them), and the
bytes, rate and time left its running moves report.
It counts across every namespace, or only the current one when you may not list every
namespace.`,
		Example:           `  kubectl bucketkeeper status shared -o yaml`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, kindObjectStore),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			t, err := parseTarget(args[0], "", kindObjectStore, kindObjectStore)
			if err != nil {
				return err
			}
			st, err := o.storeStatus(cmd.Context(), t)
			if err != nil {
				return err
			}
			if o.output != "" {
				return printStructured(o.streams.Out, o.output, st)
			}
			return o.printStoreStatus(o.streams.Out, st)
		},
	}
	o.addOutputFlag(cmd)
	return cmd
}

func (o *options) storeStatus(ctx context.Context, t target) (*storeStatus, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	store := &bkv1.ObjectStore{}
	if err := get(ctx, c, t, store); err != nil {
		return nil, err
	}
	st := &storeStatus{Name: store.Name, Endpoint: orDefault(store.Spec.Endpoint, "AWS S3"), Region: store.Spec.Region,
		AccessProvider: string(store.Spec.AccessProviderType()), Conditions: store.Status.Conditions, Scope: "cluster"}

	buckets := &bkv1.StorageBucketList{}
	accesses := &bkv1.BucketAccessList{}
	if err := listBoth(ctx, c, "", buckets, accesses); apierrors.IsForbidden(err) {
		ns, nsErr := o.namespace()
		if nsErr != nil {
			return nil, nsErr
		}
		st.Scope = "namespace " + ns
		err = listBoth(ctx, c, ns, buckets, accesses)
		if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}

	onStore := map[string]bool{} // namespace/name of the store's buckets
	groups := map[verdict]*group{}
	var sizeSum resource.Quantity
	quota := &quotaReport{}
	if g := store.Spec.Guardrails.Quota; g != nil {
		quota.Default, quota.Max = g.Default, g.Max
	}
	for i := range buckets.Items {
		sb := &buckets.Items[i]
		if sb.HomeStore() != store.Name {
			continue
		}
		onStore[sb.Namespace+"/"+sb.Name] = true
		st.Totals.Buckets++
		key := verdict{}
		key.ready, key.reason, _ = conditionStatus(sb.Status.Conditions, bkv1.ConditionReady)
		key.available, key.availableReason, _ = conditionStatus(sb.Status.Conditions, bkv1.ConditionAvailable)
		count(groups, key, sb.Namespace+"/"+sb.Name)
		if u := sb.Status.Usage; u != nil {
			st.Totals.UsageBytes += u.Bytes
			st.Totals.UsageObjects += u.Objects
			st.Totals.MeasuredBuckets++
		}
		if q := sb.Spec.Quota; q != nil && (q.MaxSize != nil || q.MaxObjects != nil) {
			quota.Buckets++
			if q.MaxSize != nil {
				sizeSum.Add(*q.MaxSize)
			}
			if q.MaxObjects != nil {
				quota.MaxObjectsSum += *q.MaxObjects
			}
		}
	}
	st.Buckets = sortedGroups(groups)
	st.Retirement = retirementOf(store, buckets.Items, st.Scope == "cluster")
	if quota.Buckets > 0 {
		quota.MaxSizeSum = &sizeSum
	}
	if quota.Buckets > 0 || quota.Default != nil || quota.Max != nil {
		st.Quota = quota
	}

	groups = map[verdict]*group{}
	for i := range accesses.Items {
		ba := &accesses.Items[i]
		if !accessOnStore(ba, store.Name, onStore) {
			continue
		}
		st.Totals.Accesses++
		if ba.Status.AccessKeyID != "" {
			st.Totals.Keys++
		}
		if ba.Status.Rotation.State != "" && ba.Status.Rotation.State != bkv1.RotationIdle {
			st.Totals.Rotating++
		}
		key := verdict{}
		key.ready, key.reason, _ = conditionStatus(ba.Status.Conditions, bkv1.ConditionReady)
		count(groups, key, ba.Namespace+"/"+ba.Name)
	}
	st.Accesses = sortedGroups(groups)
	return st, nil
}

func listBoth(ctx context.Context, c client.Client, ns string, buckets *bkv1.StorageBucketList, accesses *bkv1.BucketAccessList) error {
	if err := c.List(ctx, buckets, client.InNamespace(ns)); err != nil {
		return err
	}
	return c.List(ctx, accesses, client.InNamespace(ns))
}

// accessOnStore says whether an access is on the store: its status says so, or (before
// its first pass) it grants one of the store's buckets.
func accessOnStore(ba *bkv1.BucketAccess, store string, onStore map[string]bool) bool {
	if ba.Status.ObjectStore != "" {
		return ba.Status.ObjectStore == store
	}
	for _, g := range ba.Spec.Buckets {
		if onStore[ba.Namespace+"/"+g.Name] {
			return true
		}
	}
	return false
}

// verdict is what the objects of a group share.
type verdict struct{ ready, reason, available, availableReason string }

func count(groups map[verdict]*group, key verdict, example string) {
	g, ok := groups[key]
	if !ok {
		g = &group{Ready: key.ready, Reason: key.reason, Available: key.available, AvailableReason: key.availableReason}
		groups[key] = g
	}
	g.Count++
	if len(g.Examples) < maxExamples {
		g.Examples = append(g.Examples, example)
	}
}

// sortedGroups puts what needs attention first: not Ready, then not Available.
func sortedGroups(groups map[verdict]*group) []group {
	out := make([]group, 0, len(groups))
	for _, g := range groups {
		sort.Strings(g.Examples)
		out = append(out, *g)
	}
	rank := func(g group) int {
		switch {
		case g.Ready != string(metav1.ConditionTrue):
			return 0
		case g.Available != "" && g.Available != string(metav1.ConditionTrue):
			return 1
		}
		return 2
	}
	sort.Slice(out, func(i, j int) bool {
		if ri, rj := rank(out[i]), rank(out[j]); ri != rj {
			return ri < rj
		}
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Reason+out[i].AvailableReason < out[j].Reason+out[j].AvailableReason
	})
	return out
}

func (o *options) printStoreStatus(w io.Writer, st *storeStatus) error {
	colour := o.colour(w)
	var b strings.Builder
	ready, reason, message := conditionStatus(st.Conditions, bkv1.ConditionReady)
	if colour {
		ready = paint(ready, ready)
	}
	fmt.Fprintf(&b, "ObjectStore %s: Ready=%s %s: %s\n", st.Name, ready, reason, message)
	fmt.Fprintf(&b, "  endpoint %s, region %s, access provider %s\n", st.Endpoint, orDefault(st.Region, "-"), st.AccessProvider)
	for _, c := range st.Conditions {
		switch {
		case c.Type == bkv1.ConditionReady:
		case c.Type == bkv1.ConditionRetired && st.Retirement != nil && st.Retirement.CountedFrom == countedFromClaims:
			// Its message has the store's counts, older than the claims' below.
			fmt.Fprintf(&b, "  %s=%s %s (the store's verdict at its last count; the counts below are the claims' now)\n", c.Type, c.Status, c.Reason)
		default:
			fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if st.Scope != "cluster" {
		fmt.Fprintf(&b, "Counted in %s only: you may not list every namespace.\n", st.Scope)
	}
	if st.Retirement != nil {
		printRetirement(&b, st.Retirement)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nStorageBuckets: %d\n", st.Totals.Buckets)
	if len(st.Buckets) > 0 {
		t := &table{header: []string{"READY", "REASON", "AVAILABLE", "REASON", "COUNT", "EXAMPLES"}, status: 0}
		for _, g := range st.Buckets {
			t.add(g.Ready, g.Ready, orDefault(g.Reason, "-"), g.Available, orDefault(g.AvailableReason, "-"), fmt.Sprint(g.Count), strings.Join(g.Examples, ", "))
		}
		if err := t.print(w, colour); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nBucketAccesses: %d (keys issued: %d, rotating: %d)\n", st.Totals.Accesses, st.Totals.Keys, st.Totals.Rotating)
	if len(st.Accesses) > 0 {
		t := &table{header: []string{"READY", "REASON", "COUNT", "EXAMPLES"}, status: 0}
		for _, g := range st.Accesses {
			t.add(g.Ready, g.Ready, orDefault(g.Reason, "-"), fmt.Sprint(g.Count), strings.Join(g.Examples, ", "))
		}
		if err := t.print(w, colour); err != nil {
			return err
		}
	}
	if st.Totals.MeasuredBuckets == 0 {
		fmt.Fprintln(w, "\nUsage: not measured (the store has no spec.adminAPI, or has not been read yet)")
	} else {
		fmt.Fprintf(w, "\nUsage: %s in %d objects, as %d of %d buckets last measured\n",
			bytesOf(st.Totals.UsageBytes), st.Totals.UsageObjects, st.Totals.MeasuredBuckets, st.Totals.Buckets)
	}
	if q := st.Quota; q != nil {
		fmt.Fprintf(w, "Quota: default %s, max %s; %d buckets ask for one", quotaOrNone(q.Default), quotaOrNone(q.Max), q.Buckets)
		if q.Buckets > 0 {
			fmt.Fprintf(w, " (together maxSize %s, maxObjects %d)", q.MaxSizeSum.String(), q.MaxObjectsSum)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func quotaOrNone(q *bkv1.BucketQuota) string {
	if q == nil {
		return "none"
	}
	return quotaString(q)
}
