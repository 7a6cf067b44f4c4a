#!/usr/bin/env bash
# Runs test suites concurrently, each with its output in its own log, and fails when any
# of them failed.
#
#   hack/run-suites.sh LOGDIR NAME 'COMMAND' [NAME 'COMMAND' ...]
#
# Most of the suites' time is spent waiting on real servers, not on the CPU, so running
# them side by side shortens `make test` by minutes on two cores. Every suite runs to its
# end, whatever the others do. Each log is printed whole as its suite finishes, so the
# output of one suite is never interleaved with another's; a summary with each suite's
# status, wall time and CPU time closes the output. The CPU time is user plus system of
# the suite's processes that were waited for (its go commands, test binaries and the peers
# they start and stop), so set against two cores' wall time it shows whether the suites
# wait or compete. A suite that is interrupted is stopped by PID.
set -uo pipefail

if (($# < 3 || ($# - 1) % 2 != 0)); then
	echo "usage: $0 LOGDIR NAME COMMAND [NAME COMMAND ...]" >&2
	exit 2
fi
logdir=$1
shift
mkdir -p "$logdir"

# cpu_seconds turns the children's line of bash's `times` ("1m2.500s 0m3.250s") into
# whole seconds of user plus system time.
cpu_seconds() {
	local user sys
	{ read -r _ && read -r user sys; } <"$1" 2>/dev/null || { echo "?"; return; }
	awk -v u="$user" -v s="$sys" 'function sec(t) { split(t, a, "m"); sub("s", "", a[2]); return a[1] * 60 + a[2] }
		BEGIN { printf "%d", sec(u) + sec(s) }'
}

names=() pids=() starts=()
declare -A byPid=()
trap 'for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null; done; exit 130' INT TERM

set -m # each suite in its own process group, so an interrupt stops all of its processes
while (($#)); do
	name=$1 cmd=$2
	shift 2
	(
		bash -c "$cmd"
		rc=$?
		times >"$logdir/$name.cpu" # no pipe: in a subshell, times would count nothing
		exit $rc
	) >"$logdir/$name.log" 2>&1 &
	pids+=($!)
	names+=("$name")
	starts+=("$SECONDS")
	byPid[$!]=$((${#names[@]} - 1))
	echo ">> $name started (log: $logdir/$name.log)"
done
set +m

failed=0 summary=()
running=("${pids[@]}")
while ((${#running[@]} > 0)); do
	done_pid=
	wait -n -p done_pid "${running[@]}"
	rc=$?
	if [[ -z $done_pid ]]; then
		echo "run-suites: wait failed (exit $rc)" >&2
		exit 2
	fi
	i=${byPid[$done_pid]}
	took=$((SECONDS - starts[i]))
	left=()
	for p in "${running[@]}"; do [[ $p == "$done_pid" ]] || left+=("$p"); done
	running=("${left[@]}")
	cpu=$(cpu_seconds "$logdir/${names[i]}.cpu")
	echo ">> ===== ${names[i]}: exit $rc after ${took}s (cpu ${cpu}s) ====="
	cat "$logdir/${names[i]}.log"
	if ((rc != 0)); then
		failed=1
		summary+=("FAIL ${names[i]} (exit $rc, ${took}s, cpu ${cpu}s)")
	else
		summary+=("ok   ${names[i]} (${took}s, cpu ${cpu}s)")
	fi
done

echo ">> ===== summary ====="
printf '%s\n' "${summary[@]}"
exit "$failed"
