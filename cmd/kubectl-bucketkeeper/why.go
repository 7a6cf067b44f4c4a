package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/remedy"
)

func newWhyCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "why [STORAGEBUCKET | bucketaccess/NAME | objectstore/NAME]",
		Short: "Say what holds an object back, and what to do about it",
		Long: `why names the condition that holds a StorageBucket, BucketAccess or ObjectStore back,
says in words what its reason means, who can act (you, or the platform team that owns
the ObjectStore) and what to do, and follows the chain: an access waiting for its
bucket, a bucket waiting for its store. A refusal of the store's guardrails names the
guardrail. Without a name it answers for every StorageBucket and BucketAccess of the
namespace (-A: of the cluster) that is not fine.

The remedies come from the table docs/kubectl-plugin.md prints.`,
		Example: `  kubectl bucketkeeper why photos
  kubectl bucketkeeper why bucketaccess/photos-reader
  kubectl bucketkeeper why objectstore/shared
  kubectl bucketkeeper why -A`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeNames(o, kindStorageBucket, kindBucketAccess, kindObjectStore),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			e := &explainer{c: c}
			if len(args) == 1 {
				_, t, err := o.target(args[0], kindStorageBucket, kindStorageBucket, kindBucketAccess, kindObjectStore)
				if err != nil {
					return err
				}
				f, err := e.explain(cmd.Context(), t)
				if err != nil {
					return err
				}
				if o.output != "" {
					return printStructured(o.streams.Out, o.output, f)
				}
				return o.printFinding(o.streams.Out, f)
			}
			fs, scope, err := o.explainAll(cmd.Context(), e)
			if err != nil {
				return err
			}
			if o.output != "" {
				return printStructured(o.streams.Out, o.output, map[string]any{"items": fs})
			}
			if len(fs) == 0 {
				fmt.Fprintf(o.streams.Out, "Every StorageBucket and BucketAccess %s is fine.\n", scope)
				return nil
			}
			for i, f := range fs {
				if i > 0 {
					fmt.Fprintln(o.streams.Out)
				}
				if err := o.printFinding(o.streams.Out, f); err != nil {
					return err
				}
			}
			return nil
		},
	}
	o.addListFlags(cmd)
	return cmd
}

// explainAll returns the findings of every StorageBucket and BucketAccess of the
// listing that is not fine, and says what the listing covered.
func (o *options) explainAll(ctx context.Context, e *explainer) ([]finding, string, error) {
	ns, err := o.listNamespace()
	if err != nil {
		return nil, "", err
	}
	scope := "in namespace " + ns
	if ns == "" {
		scope = "in the cluster"
	}
	buckets := &bkv1.StorageBucketList{}
	if err := e.c.List(ctx, buckets, client.InNamespace(ns)); err != nil {
		return nil, "", err
	}
	accesses := &bkv1.BucketAccessList{}
	if err := e.c.List(ctx, accesses, client.InNamespace(ns)); err != nil {
		return nil, "", err
	}
	var out []finding
	for i := range buckets.Items {
		if f := e.explainObject(ctx, &buckets.Items[i]); f.State != remedy.Fine {
			out = append(out, f)
		}
	}
	for i := range accesses.Items {
		if f := e.explainObject(ctx, &accesses.Items[i]); f.State != remedy.Fine {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].object() < out[j].object() })
	return out, scope, nil
}

// stateWords says what a state asks of the reader.
var stateWords = map[remedy.State]string{
	remedy.Fine:    "nothing to do",
	remedy.Waiting: "the operator is at it, or waits",
	remedy.Blocked: "a person must act",
}

// printFinding writes a finding as prose: the headline, the message, what it means
// and what to do, then what it waits for, indented.
func (o *options) printFinding(w io.Writer, f finding) error {
	var b strings.Builder
	writeFinding(&b, f, "", o.now, o.colour(w))
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFinding(b *strings.Builder, f finding, indent string, now func() time.Time, colour bool) {
	bold := func(s string) string {
		if colour {
			return paint("bold", s)
		}
		return s
	}
	head := f.object()
	switch {
	case f.Condition == "":
		fmt.Fprintf(b, "%s%s has no status yet (%s)\n", indent, bold(head), stateWords[f.State])
	case f.State == remedy.Fine:
		fmt.Fprintf(b, "%s%s is fine: %s=%s %s\n", indent, bold(head), f.Condition, f.Status, f.Reason)
	default:
		status := f.Status
		if colour {
			status = paint(f.Status, f.Status)
		}
		fmt.Fprintf(b, "%s%s: %s=%s %s (%s)\n", indent, bold(head), f.Condition, status, f.Reason, stateWords[f.State])
	}
	line := func(label, text string) {
		if text != "" {
			fmt.Fprintf(b, "%s  %-10s %s\n", indent, label, text)
		}
	}
	line("Message:", f.Message)
	if f.Since != nil {
		line("Since:", age(now(), f.Since)+" ago")
	}
	line("Guardrail:", f.Guardrail)
	line("Means:", f.Means)
	if f.State != remedy.Fine && f.Who != remedy.Nobody {
		line("Who:", string(f.Who))
	}
	line("To do:", f.Do)
	line("Note:", f.Note)
	for _, a := range f.Also {
		fmt.Fprintf(b, "%s  Also %s=%s %s (%s): %s\n", indent, a.Condition, a.Status, a.Reason, stateWords[a.State], a.Message)
		if a.Do != "" {
			fmt.Fprintf(b, "%s    To do: %s\n", indent, a.Do)
		}
	}
	for _, c := range f.Because {
		fmt.Fprintf(b, "%s  because\n", indent)
		writeFinding(b, c, indent+"    ", now, colour)
	}
}
