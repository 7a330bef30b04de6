#!/usr/bin/env bash
# bench-store.sh runs the store's Speed benchmarks (taskgraph/bench_test.go)
# and prints their medians and the group-commit / baseline ratio.
#
#   scripts/bench-store.sh [rounds] [benchtime]      (defaults: 5 2000x)
#
# The store and the one-transaction-per-operation baseline run side by side in
# every round (one test process per round, so that machine noise hits both
# alike); the 1k/1M claim-next benchmark runs with -count in one process,
# which builds its 1M-task fixture once. Raw results go to $OUT (default a
# temporary folder); benchstat, when it can be run, prints its own summary.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
benchtime=${2:-2000x}
OUT=${OUT:-$(mktemp -d)}
echo "results in $OUT (rounds=$rounds benchtime=$benchtime)"
: >"$OUT/commit.txt"
for i in $(seq "$rounds"); do
	go test -run '^$' -bench 'ClaimComplete|BaselineTxPerOp' -benchtime "$benchtime" -count 1 ./taskgraph >>"$OUT/commit.txt"
done
go test -run '^$' -bench 'ClaimNextScale' -benchtime "$benchtime" -count "$rounds" ./taskgraph >"$OUT/scale.txt"

# medians of every reported unit, per benchmark, and the ratios the issue asks for
awk '
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	if (!(name in seen)) { seen[name] = 1; order[++count] = name }
	for (f = 3; f < NF; f += 2) { key = name SUBSEP $(f+1); vals[key] = vals[key] " " $f; units[name] = units[name] (index(units[name], " " $(f+1) " ") ? "" : " " $(f+1) " ") }
}
END {
	for (k = 1; k <= count; k++) {
		name = order[k]; line = sprintf("%-48s", name)
		nu = split(units[name], us, " ")
		for (u = 1; u <= nu; u++) { m[name, us[u]] = median(vals[name SUBSEP us[u]]); line = line sprintf("  %12.4g %s", m[name, us[u]], us[u]) }
		print line
	}
	for (w = 1; w <= 8; w += 7) for (s = 1; s <= 2; s++) {
		sync = s == 1 ? "full" : "normal"
		a = m["BenchmarkClaimComplete/workers=" w "/sync=" sync, "cycles/s"]
		b = m["BenchmarkBaselineTxPerOp/workers=" w "/sync=" sync, "cycles/s"]
		if (a && b) printf "group commit / baseline, workers=%d sync=%s: %.2fx\n", w, sync, a / b
	}
	a = m["BenchmarkClaimNextScale/tasks=1000", "ns/op"]; b = m["BenchmarkClaimNextScale/tasks=1000000", "ns/op"]
	if (a && b) printf "claim-next cost, 1M tasks / 1k tasks: %.2fx\n", b / a
}' "$OUT/commit.txt" "$OUT/scale.txt"

if command -v benchstat >/dev/null 2>&1; then
	benchstat "$OUT/commit.txt" "$OUT/scale.txt"
fi
