#!/usr/bin/env bash
# lean.sh SRC trims a writable copy of SeaweedFS's module source (SRC) before
# hack/peers/build.sh builds `weed` from it: it drops the plugins that register
# themselves by a blank import alone (filer stores, notification queues, remote-storage
# and replication sinks, KMS providers) and that no test configures. The tests run
# `weed mini` on its default filer store (leveldb2), its filer credential store and no
# notification queue, replication or remote storage, so they run the same SeaweedFS
# code; what goes is some 250 packages (MongoDB, Cassandra, Redis, Kafka, Google Pub/Sub
# and other clients), a fifth of what weed compiles that nothing else here does.
#
# Only init-time registrations are removed: a blank import has no other effect, and the
# four replication inputs deleted below only append themselves to sub.NotificationInputs.
# A SeaweedFS upgrade that moves them fails here, not silently.
set -euo pipefail

src=${1:?usage: lean.sh SRC}
plugins='filer/(arangodb|cassandra|cassandra2|elastic/v7|etcd|foundationdb|hbase|mongodb|mysql|mysql2|postgres|postgres2|redis|redis2|redis3|rocksdb|sqlite|tarantool|tikv|ydb)'
plugins+='|credential/postgres|notification/(aws_sqs|gocdk_pub_sub|google_pub_sub|kafka|webhook)'
plugins+='|remote_storage/(azure|gcs)|replication/sink/(azuresink|b2sink|gcssink)|kms/(gcp|openbao)'
plugins+='|storage/backend/rclone_backend|worker/tasks/iceberg'
pattern="^\s*_ \"github.com/seaweedfs/seaweedfs/weed/($plugins)\""

mapfile -t files < <(grep -rlE "$pattern" --include='*.go' "$src/weed" | grep -v '_test\.go$')
if [ "${#files[@]}" -eq 0 ]; then
	echo "lean.sh: no plugin registration found in $src: did SeaweedFS move them?" >&2
	exit 1
fi
sed -i -E "\#$pattern#d" "${files[@]}"

inputs=("$src"/weed/replication/sub/notification_{aws_sqs,gocdk_pub_sub,google_pub_sub,kafka}.go)
for f in "${inputs[@]}"; do
	grep -q 'NotificationInputs = append(NotificationInputs' "$f" || {
		echo "lean.sh: $f is not a bare replication input any more" >&2
		exit 1
	}
done
rm "${inputs[@]}"
