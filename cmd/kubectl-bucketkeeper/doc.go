// Command kubectl-bucketkeeper is bucketkeeper's kubectl plugin (kubectl bucketkeeper):
// everyday questions about StorageBuckets, BucketAccesses and ObjectStores answered in
// one command each, with kubectl's own kubeconfig and namespace flags (cli-runtime).
//
//   - tree (tree.go, treeview.go): a claim with its store, bucket, Secrets and accesses;
//   - why (why.go, explain.go): the condition that holds an object back, with the
//     remedy of its reason from internal/remedy, following the chain to its cause;
//   - env (env.go): a command run with an access's Secret as environment;
//   - probe (probe.go): a probe asked for through the annotation, and its verdict;
//   - status (status.go, retirement.go): an ObjectStore's buckets, keys, quota and
//     usage, and its retirement where it retires;
//   - adopt (adopt.go, adopt_read.go, adopt_map.go): StorageBucket manifests that adopt
//     a store's unowned buckets with every setting they have, for the platform team.
//     The one verb that talks to a store, through the operator's S3 client made
//     read-only (storeclient.go).
//
// Completion of verbs, flags and object names is cobra's (complete.go). The plugin is
// a module of its own, so the operator's module never compiles cli-runtime; its tests
// run the verbs in-process against the real control plane, SeaweedFS and an operator
// started in the test binary.
package main
