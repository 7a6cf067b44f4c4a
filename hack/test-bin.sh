#!/usr/bin/env bash
# Builds test binaries once into a directory and runs them as `go test` runs them, so a
# second `make test` links only the binaries whose packages changed.
#
#   hack/test-bin.sh build DIR [GO TEST BUILD FLAGS...] -- PACKAGE...
#   hack/test-bin.sh run DIR [TEST BINARY FLAGS (-test.*)...] -- PACKAGE...
#
# Both run in the module of the current directory. go test caches compiled packages but
# links every test binary again on each run: 118 CPU seconds of a warm `make test`, a
# fifth of its CPU, and the race-built controller suite, which two suites run, was linked
# twice. `go test -c -o DIR/` writes PKG.test for each package with tests and skips the
# link of a binary already there with the build ID it would get, so the suites run what
# is in DIR, linked by one go command before they start.
#
# run does what go test does with a built binary: it runs it in its package's directory
# with -test.paniconexit0 and the flags given, as many packages at a time as there are CPUs
# (go test's default -p), prints each package's output whole when it ends, in order,
# followed by go test's "ok" or "FAIL" line, and fails when any package failed. A package
# whose binary is missing fails rather than being skipped.
set -uo pipefail

usage() {
	echo "usage: $0 build|run DIR [FLAGS...] -- PACKAGE..." >&2
	exit 2
}
(($# >= 3)) || usage
mode=$1 dir=$2
shift 2
flags=()
while (($#)) && [[ $1 != -- ]]; do
	flags+=("$1")
	shift
done
(($# >= 2)) || usage
shift
pkgs=("$@")
go=${GO:-go}

case $mode in
build)
	mkdir -p "$dir"
	exec "$go" test -c -o "$dir/" "${flags[@]}" "${pkgs[@]}"
	;;
run) ;;
*) usage ;;
esac

# Packages with tests, in go list's order, as "IMPORTPATH DIR". A failed listing, or one
# with no tests in it, fails: a suite that runs nothing must not pass.
listing=$("$go" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "${pkgs[@]}") ||
	{ echo "test-bin: go list ${pkgs[*]} failed" >&2; exit 1; }
mapfile -t tested < <(grep . <<<"$listing")
((${#tested[@]} > 0)) || { echo "test-bin: no package with tests in ${pkgs[*]}" >&2; exit 1; }
dir=$(cd "$dir" && pwd) || exit 1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
trap 'kill $(jobs -p) 2>/dev/null; exit 130' INT TERM

# run_one runs one package's binary; its output and status go to files named by index.
run_one() {
	local i=$1 path=${2%% *} pkgdir=${2#* } start=$SECONDS rc=0
	local bin="$dir/${path##*/}.test"
	{
		if [[ -x $bin ]]; then
			(cd "$pkgdir" && exec "$bin" -test.paniconexit0 "${flags[@]}") || rc=$?
		else
			echo "test-bin: $bin is missing: run $0 build first"
			rc=1
		fi
		if ((rc == 0)); then
			printf 'ok  \t%s\t%ds\n' "$path" $((SECONDS - start))
		else
			printf 'FAIL\t%s\t%ds\n' "$path" $((SECONDS - start))
		fi
	} >"$out/$i.log" 2>&1
	echo "$rc" >"$out/$i.rc"
}

failed=0 next=0 printed=0 running=0 slots=$(nproc)
while ((printed < ${#tested[@]})); do
	while ((running < slots && next < ${#tested[@]})); do
		run_one "$next" "${tested[next]}" &
		next=$((next + 1)) running=$((running + 1))
	done
	wait -n
	running=$((running - 1))
	# Print finished packages in order, as go test does.
	while ((printed < next)) && [[ -s $out/$printed.rc ]]; do
		cat "$out/$printed.log"
		[[ $(cat "$out/$printed.rc") == 0 ]] || failed=1
		printed=$((printed + 1))
	done
done
exit "$failed"
