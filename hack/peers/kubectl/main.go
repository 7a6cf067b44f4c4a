// Command kubectl is the upstream kubectl (k8s.io/kubernetes/cmd/kubectl's main, whose
// command lives in k8s.io/kubectl): the docs' runbooks run their commands with it, as
// the platform engineer reading them types them, plugins (kubectl-bucketkeeper on PATH)
// included.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
