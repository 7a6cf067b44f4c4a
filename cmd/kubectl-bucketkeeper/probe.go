package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/remedy"
)

// probePoll is how often probe reads the claim while it waits for the verdict.
const probePoll = 300 * time.Millisecond

type probeOptions struct {
	*options
	timeout time.Duration
}

func newProbeCommand(parent *options) *cobra.Command {
	o := &probeOptions{options: parent}
	cmd := &cobra.Command{
		Use:   "probe STORAGEBUCKET",
		Short: "Probe a bucket now and wait for the verdict",
		Long: `probe asks the operator to probe the bucket now, as the annotation
` + bkv1.AnnotationProbeRequestedAt + ` does, and waits until the operator has handled the
request (status.lastHandledProbeRequest) to print the bucket's Available condition.
It exits 0 when the bucket is Available, 1 when it is not or no verdict came within
--timeout. The operator serves at most one requested probe per
--min-probe-request-interval (10s by default) per bucket; a request inside it is served
at its end.`,
		Example:           `  kubectl bucketkeeper probe photos --timeout 30s`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(parent, kindStorageBucket),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0])
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", time.Minute, "How long to wait for the verdict")
	return cmd
}

func (o *probeOptions) run(ctx context.Context, arg string) error {
	if o.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	c, t, err := o.target(arg, kindStorageBucket, kindStorageBucket)
	if err != nil {
		return err
	}
	sb := &bkv1.StorageBucket{}
	if err := get(ctx, c, t, sb); err != nil {
		return err
	}
	// A request the operator cannot serve is refused here instead of timing out.
	switch {
	case sb.Spec.Suspend:
		return fmt.Errorf("%s is suspended (spec.suspend): it is not probed", t)
	case sb.DeletionTimestamp != nil:
		return fmt.Errorf("%s is being deleted", t)
	case !apimeta.IsStatusConditionTrue(sb.Status.Conditions, bkv1.ConditionProvisioned):
		return fmt.Errorf("%s has no bucket to probe yet%s", t, notReady(ctx, c, sb))
	}

	requested := o.now().UTC().Format(time.RFC3339Nano)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{bkv1.AnnotationProbeRequestedAt: requested}}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, sb, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("asking for a probe of %s: %w", t, err)
	}
	fmt.Fprintf(o.streams.ErrOut, "Asked for a probe of %s (%s=%s); waiting up to %s for the verdict.\n", t, bkv1.AnnotationProbeRequestedAt, requested, o.timeout)

	wait, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	tick := time.NewTicker(probePoll)
	defer tick.Stop()
	lastSaid := ""
	for {
		if err := c.Get(wait, client.ObjectKeyFromObject(sb), sb); err != nil && wait.Err() == nil {
			return err
		}
		available := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionAvailable)
		if sb.Status.LastHandledProbeRequest == requested {
			return o.verdict(t, sb, available)
		}
		// Say once what the bucket waits for (a store outage, say).
		if available != nil && available.Status != metav1.ConditionTrue && available.Reason != lastSaid {
			lastSaid = available.Reason
			fmt.Fprintf(o.streams.ErrOut, "Meanwhile: Available=%s %s: %s\n", available.Status, available.Reason, available.Message)
		}
		select {
		case <-wait.Done():
			msg := fmt.Sprintf("no verdict on %s within %s", t, o.timeout)
			if available != nil {
				msg += fmt.Sprintf("; Available=%s %s: %s", available.Status, available.Reason, available.Message)
				if r, ok := remedy.For(available.Reason); ok && r.State != remedy.Fine {
					msg += "\nTo do: " + r.Do
				}
			}
			return &exitError{code: 1, msg: msg}
		case <-tick.C:
		}
	}
}

// verdict prints the probe's result: Available, its reason, the latency; a bucket that
// is not Available exits 1 with its remedy.
func (o *probeOptions) verdict(t target, sb *bkv1.StorageBucket, available *metav1.Condition) error {
	if available == nil {
		return &exitError{code: 1, msg: fmt.Sprintf("%s was probed but has no Available condition", t)}
	}
	latency := ""
	if sb.Status.LastProbeLatency != nil {
		latency = " in " + sb.Status.LastProbeLatency.Duration.String()
	}
	fmt.Fprintf(o.streams.Out, "%s: Available=%s %s%s: %s\n", t, available.Status, available.Reason, latency, available.Message)
	if available.Status == metav1.ConditionTrue {
		return nil
	}
	if r, ok := remedy.For(available.Reason); ok {
		fmt.Fprintf(o.streams.ErrOut, "To do: %s\n", r.Do)
	}
	return &exitError{code: 1}
}
