#!/usr/bin/env bash
# twinspeed.sh LLAMA_BENCH SHAPE QUANT [LAYERS] [-- LLAMA_BENCH_FLAGS...]
#
# Times the three kinds of twin `headroom synth --weights` writes (zero,
# routed, random) of one shape with llama-bench, and prints a row for each:
# the mean and standard deviation of prompt processing (pp) and generation
# (tg) in tokens per second. With zero weights a mixture-of-experts router
# ties on every token, so a batch reads fewer expert weights than a real
# model's; routed gives each token its own experts while the file stays
# sparse, and random is a fully written file to hold both to.
#
# LAYERS, when given, keeps the shape's first LAYERS layers (synth
# --layers), so a big shape fits the machine. The default run is
# -p 512 -n 64 -r 3 -t $(nproc); flags after -- are added (a later -p, -n,
# -r or -t overrides). The random twin takes the shape's full size on disk
# in a temporary folder (TMPDIR), removed at the end.
#
# Needs go (it builds headroom from this tree) and jq.
set -euo pipefail

usage='usage: twinspeed.sh LLAMA_BENCH SHAPE QUANT [LAYERS] [-- LLAMA_BENCH_FLAGS...]'
bench=${1:?$usage}
shape=${2:?$usage}
quant=${3:?$usage}
shift 3
layers=0
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
	layers=$1
	shift
fi
if [ $# -gt 0 ]; then
	[ "$1" = "--" ] || { echo "$usage" >&2; exit 2; }
	shift
fi
[ -x "$bench" ] || { echo "$bench is not an executable llama-bench" >&2; exit 1; }
command -v jq >/dev/null || { echo "twinspeed.sh needs jq" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/headroom" ./cmd/headroom)

printf '%-7s %10s %10s %22s %22s\n' weights 'file' 'on disk' 'pp t/s (mean ± sd)' 'tg t/s (mean ± sd)'
for w in zero routed random; do
	f=$work/$w.gguf
	"$work/headroom" synth --weights "$w" --layers "$layers" --quant "$quant" "$shape" "$f" >"$work/$w.synth"
	"$bench" -m "$f" -p 512 -n 64 -r 3 -o json -t "$(nproc)" "$@" >"$work/$w.json" 2>"$work/$w.log" || {
		echo "llama-bench failed on the $w twin:" >&2
		tail -n 20 "$work/$w.log" >&2
		exit 1
	}
	# One result per test: pp has n_gen 0, tg n_prompt 0.
	row() {
		jq -r "map(select($1)) | if length == 0 then \"-\" else
			.[0] | \"\\(.avg_ts * 100 | round / 100) ± \\(.stddev_ts * 100 | round / 100)\" end" "$work/$w.json"
	}
	printf '%-7s %10s %10s %22s %22s\n' "$w" \
		"$(du -h --apparent-size "$f" | cut -f1)" "$(du -h "$f" | cut -f1)" \
		"$(row '.n_prompt > 0 and .n_gen == 0')" "$(row '.n_gen > 0 and .n_prompt == 0')"
	rm -f "$f"
done
head -n 1 "$work/zero.synth" | sed 's/^wrote [^:]*: /shape: /; s/ (sparse;.*//'
jq -r '.[0] | "llama-bench \(.build_commit) (\(.backends)), \(.n_threads) threads, \(.cpu_info)"' "$work/zero.json"
