// Command kube-node is the upstream kubelet, kube-proxy, kube-controller-manager and
// kube-scheduler in one binary, bound to its parent's life: `kube-node kubelet ARGS`
// runs the kubelet. One binary is linked once; four would each link (about 2.5 GB and
// a minute on two cores apiece) the same few thousand packages.
package main

import (
	"context"
	"fmt"
	"os"
	_ "time/tzdata"

	"github.com/bucketkeeper/bucketkeeper/hack/peers/lifeline"
	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() *cobra.Command{
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy":              proxy.NewProxyCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: kube-node kubelet|kube-proxy|kube-controller-manager|kube-scheduler [flags]")
		os.Exit(2)
	}
	lifeline.Bind()
	cmd := commands[os.Args[1]]()
	cmd.SetArgs(os.Args[2:])
	os.Exit(cli.Run(cmd))
}
