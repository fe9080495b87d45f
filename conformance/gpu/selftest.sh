#!/usr/bin/env bash
# selftest.sh checks the CUDA pipeline (prepare.sh, device.sh, import.mjs)
# on a machine without a GPU:
#
#   1. import.mjs reads testdata/cpu-dryrun.tar, what `device.sh --cpu`
#      sent back for two cases on the CPU build of the same llama.cpp, and
#      must make records whose figures equal testdata/server's CPU records
#      of those profiles (the log format, its phases and the record are
#      the ones run.mjs makes);
#   2. .gpu/cases.tsv, where prepare.sh has made one, must be what
#      caselist.mjs writes from harness/cases.mjs now (else carry a fresh
#      one: the GPU machine would measure an old list);
#   3. with --engine DIR (a CPU build of the source, as engine.sh prints),
#      device.sh --cpu runs two cases from .gpu itself and import.mjs
#      compares them likewise.
#
#   conformance/gpu/selftest.sh [--engine DIR]
#
# Needs Node and Go; writes only under a temporary folder and .gpu-work.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
engine=""
while (($#)); do
	case "$1" in
	--engine) engine="$2"; shift 2 ;;
	*) echo "selftest.sh: unknown argument $1 (want: [--engine DIR])" >&2; exit 2 ;;
	esac
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$repo"

echo "== import of testdata/cpu-dryrun.tar"
node "$here/import.mjs" --golden "$tmp/records" --compare conformance/testdata/server "$here/testdata/cpu-dryrun.tar"

if [[ -e .gpu/cases.tsv ]]; then
	echo "== .gpu/cases.tsv is current"
	node "$here/caselist.mjs" --synthgen .gpu/synthgen --work "${TMPDIR:-/tmp}/headroom-conformance" >"$tmp/cases.tsv"
	diff -u .gpu/cases.tsv "$tmp/cases.tsv" || { echo "selftest.sh: .gpu/cases.tsv is stale: rerun conformance/gpu/prepare.sh" >&2; exit 1; }
fi

if [[ -n $engine ]]; then
	echo "== device.sh --cpu with $engine, then import"
	OUT="$tmp/out" "$here/device.sh" --engine "$engine" --cpu --redo \
		--only '^(qwen3-0\.6b\.Q8_0\.cudaall\.c4096x1\.nofa\.b512|lfm2-350m\.Q8_0\.cudaall\.c4096x1\.nofa\.b512)$'
	node "$here/import.mjs" --golden "$tmp/records-live" --compare conformance/testdata/server "$tmp/out"
fi
echo "selftest.sh: ok"
