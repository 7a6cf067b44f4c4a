// Command kube-apiserver is the upstream kube-apiserver, bound to its parent's life.
package main

import (
	"os"
	_ "time/tzdata"

	"github.com/bucketkeeper/bucketkeeper/hack/peers/lifeline"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	lifeline.Bind()
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
