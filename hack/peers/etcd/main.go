// Command etcd is the upstream etcd server, bound to its parent's life.
package main

import (
	"os"

	"github.com/bucketkeeper/bucketkeeper/hack/peers/lifeline"
	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	lifeline.Bind()
	etcdmain.Main(os.Args)
}
