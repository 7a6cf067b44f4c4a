#!/usr/bin/env bash
# make test's program: builds the test peers in the background while it checks the
# generated files and compiles every test binary, then runs the suites side by side on
# warm binaries (hack/run-suites.sh), go vet among them. DEVELOPMENT.md ("How make test
# runs") says what each suite is and why the steps come in this order.
#
#   make test        (the Makefile passes the settings below; run it through make)
#
# Settings, from the Makefile: GO, TEST_MAKE (the make that runs the build steps),
# TEST_BIN (where the test binaries go), TEST_RUN (the test binaries' flags), TEST_LOGS
# (one log per suite), RACE_PKGS (packages run with the race detector), RACE_PARALLEL
# (how many parallel tests of a race-suite package run at once), NESTED (the nested
# modules), PACED_TESTS and MOVE_TESTS (the integration tests that mostly wait, and
# those of moves, each run in a process of their own; the moves without the race
# detector but MOVE_RACE_TESTS, which run with the paced tests), INSTALL_TESTS (the install
# test, a suite of its own), SOAK_PKG (the soak, whose short form is a suite of its
# own), FUZZ_CMDS (the short fuzzing runs) and TEST_RELEASE (make release-dry-run's
# settings in make test: the install suite installs what it writes into dist/).
set -euo pipefail
cd "$(dirname "$0")/.."
for v in GO TEST_MAKE TEST_BIN TEST_RUN TEST_LOGS RACE_PKGS RACE_PARALLEL NESTED PACED_TESTS MOVE_TESTS MOVE_RACE_TESTS INSTALL_TESTS SOAK_PKG FUZZ_CMDS TEST_RELEASE; do
	[[ -n ${!v:-} ]] || { echo "hack/test.sh: $v is not set; run make test" >&2; exit 2; }
done
root=$PWD

# The peers are built in the background, beside the steps below and then beside what
# needs none of them (vet, fuzz, the install suite's release dry run), which fills the
# CPU the peers' links leave idle; every other suite starts once they are built. bin/peers.rc holds the build's
# exit status once it has ended.
mkdir -p bin
rm -f bin/peers.rc
(
	built=0
	hack/peers/build.sh >bin/peers.out 2>bin/peers.log || built=$?
	echo $built >bin/peers.rc.tmp && mv bin/peers.rc.tmp bin/peers.rc
) &
peers=$!
rc=0
for step in test-binaries-race check-shared-deps verify-generated test-binaries; do
	start=$SECONDS
	$TEST_MAKE --no-print-directory $step || { rc=$?; break; }
	echo ">> $step took $((SECONDS - start))s"
done
if [ $rc != 0 ]; then
	wait $peers
	exit $rc
fi
export BUCKETKEEPER_PEERS_BIN=$(hack/peers/build.sh --dir)

# with_peers runs a suite's command once the peers are built, or fails it at once if
# their build failed (the peers suite prints why).
with_peers() {
	echo "{ while [ ! -e $root/bin/peers.rc ]; do sleep 1; done; [ \"\$(cat $root/bin/peers.rc)\" = 0 ] || { echo '>> the peers were not built: see the peers suite'; exit 1; }; $1; }"
}

# The nested modules' suite: test/manifests without the install test, then the others.
nested="rc=0; (cd test/manifests && $root/hack/test-bin.sh run $root/$TEST_BIN/test-manifests $TEST_RUN -test.skip \"$INSTALL_TESTS\" -- ./...) || rc=1;"
for m in $NESTED; do
	[[ $m == test/manifests ]] && continue
	nested+=" (cd $m && $root/hack/test-bin.sh run $root/$TEST_BIN/${m//\//-} $TEST_RUN -- ./...) || rc=1;"
done
nested+=' exit $rc'

# The integration suites' parallel tests mostly wait on the stores and the operator, not
# on the CPU: more of them at once than the machine's cores (go test's default) keeps
# their processes from being the last to end by many minutes.
parallel_run="$TEST_RUN -test.parallel=$RACE_PARALLEL"
# The integration tests run in three processes of their own, each with its control
# plane and stores, beside the race suite's other packages: the paced ones, the moves
# (long, parallel, between every pair of stores; without the race detector, but for
# MOVE_RACE_TESTS, which run with the paced ones) and the others; a test runs in exactly
# one of them, as -run and -skip take the same patterns.
race_others=$(tr ' ' '\n' <<<"$RACE_PKGS" | grep -vx './test/integration/' | tr '\n' ' ')
exec hack/run-suites.sh "$TEST_LOGS" \
	peers "while [ ! -e bin/peers.rc ]; do sleep 1; done; cat bin/peers.log; echo \">> peers in $BUCKETKEEPER_PEERS_BIN\"; exit \$(cat bin/peers.rc)" \
	race "$(with_peers "hack/test-bin.sh run $TEST_BIN/race $parallel_run -- $race_others")" \
	race-integration "$(with_peers "hack/test-bin.sh run $TEST_BIN/race $parallel_run -test.skip \"$PACED_TESTS|$MOVE_TESTS\" -- ./test/integration/")" \
	moves "$(with_peers "hack/test-bin.sh run $TEST_BIN/main $parallel_run -test.run \"$MOVE_TESTS\" -test.skip \"$MOVE_RACE_TESTS\" -- ./test/integration/")" \
	race-waiting "$(with_peers "hack/test-bin.sh run $TEST_BIN/race $parallel_run -test.run \"$PACED_TESTS|$MOVE_RACE_TESTS\" -- ./test/integration/")" \
	rest "$(with_peers "hack/test-bin.sh run $TEST_BIN/main $TEST_RUN -- \$($GO list ./... | grep -v -e /internal/ -e /cmd/ -e /test/integration -e /test/soak)")" \
	soak "$(with_peers "hack/test-bin.sh run $TEST_BIN/main $TEST_RUN -- $SOAK_PKG")" \
	install "$TEST_MAKE --no-print-directory release-dry-run $TEST_RELEASE && $(with_peers "cd test/manifests && BUCKETKEEPER_RELEASE_DIST=$root/dist $root/hack/test-bin.sh run $root/$TEST_BIN/test-manifests $TEST_RUN -test.run \"$INSTALL_TESTS\" -- .")" \
	nested "$(with_peers "$nested")" \
	fuzz "$FUZZ_CMDS" \
	vet "$TEST_MAKE --no-print-directory vet"
