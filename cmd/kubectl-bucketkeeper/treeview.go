package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// printTrees prints trees as one table: a row per object (its summary condition),
// under it a row per other condition (with the age of its last transition) and a row of
// its details.
func (o *options) printTrees(trees []*node) error {
	t := &table{header: []string{"NAME", "STATUS", "REASON", "AGE", "MESSAGE"}, status: 1}
	if o.allNamespaces {
		t.header, t.status = append([]string{"NAMESPACE"}, t.header...), 2
	}
	for _, root := range trees {
		o.addNode(t, root, root.Namespace, nil)
	}
	return t.print(o.streams.Out, o.colour(o.streams.Out))
}

func (o *options) addNode(t *table, n *node, namespace string, lasts []bool) {
	now := o.now()
	name := n.Kind + "/" + n.Name
	if n.Kind == "Bucket" {
		name = "Bucket " + n.Name
	}
	tone := n.Status
	if n.Status == "present" {
		tone = "True"
	}
	reason := n.Reason
	if reason == "" {
		reason = "-"
	}
	o.addRow(t, namespace, tone, treePrefix(lasts)+name, statusWord(n.Status), reason, age(now, n.Created), n.Message)

	// What hangs below the row: its conditions and details, then its children.
	below := continuation(lasts, len(n.Children) == 0)
	for _, c := range n.Conditions {
		if c.Type == n.summary || (n.Kind == "StorageBucket" && bucketConditions[c.Type]) {
			continue
		}
		lt := c.LastTransitionTime
		o.addRow(t, namespace, string(c.Status), below+"  "+c.Type, string(c.Status), c.Reason, age(now, &lt), c.Message)
	}
	if len(n.Details) > 0 {
		parts := make([]string, len(n.Details))
		for i, d := range n.Details {
			parts[i] = d.key + ": " + d.value
		}
		o.addRow(t, namespace, "", below+"  ", "", "", "", strings.Join(parts, " · "))
	}
	for i, child := range n.Children {
		o.addNode(t, child, namespace, append(append([]bool(nil), lasts...), i == len(n.Children)-1))
	}
}

func (o *options) addRow(t *table, namespace, tone string, cells ...string) {
	if o.allNamespaces {
		cells = append([]string{namespace}, cells...)
	}
	t.add(tone, cells...)
}

// bucketConditions are the StorageBucket's conditions about its bucket: tree prints
// them under the bucket, not under the claim.
var bucketConditions = map[string]bool{bkv1.ConditionProvisioned: true, bkv1.ConditionConfigured: true, bkv1.ConditionAvailable: true}

// continuation is the tree drawing beside the rows that belong to a node (its
// conditions and details) at the depth lasts gives: the ancestors' lines go on, and
// so does the node's own when it has children.
func continuation(lasts []bool, leaf bool) string {
	var b strings.Builder
	for _, last := range lasts {
		if last {
			b.WriteString("   ")
		} else {
			b.WriteString("│  ")
		}
	}
	if !leaf {
		b.WriteString("│")
	} else {
		b.WriteString(" ")
	}
	return b.String()
}

// statusWord is a node's status as printed.
func statusWord(s string) string {
	switch s {
	case "present":
		return "Present"
	case "missing":
		return "Missing"
	case "":
		return "-"
	}
	return s
}

// bytesOf prints a byte count in binary units, as resource quantities do.
func bytesOf(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

func quotaString(q *bkv1.BucketQuota) string {
	var parts []string
	if q.MaxSize != nil {
		parts = append(parts, "maxSize "+q.MaxSize.String())
	}
	if q.MaxObjects != nil {
		parts = append(parts, fmt.Sprintf("maxObjects %d", *q.MaxObjects))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
