#!/usr/bin/env bash
# prepare.sh makes, on this machine, everything a borrowed NVIDIA GPU
# machine needs to measure llama.cpp's CUDA backend with device.sh, in the
# git-ignored folder .gpu at the repository's root (the run tool's
# `carry`):
#
#   llama-src.tar.gz  the llama.cpp source the goldens model (the HEAD of
#                     the git bundle node-llama-cpp ships), without what a
#                     llama-server build never reads
#   source.env        that source's commit, build number and release, which
#                     the CMake build cannot read without the git history
#   synthgen          a static build of conformance/cmd/synthgen: that
#                     machine has no Go toolchain
#   cases.tsv         the CUDA cases (caselist.mjs), in the order to run
#
#   conformance/gpu/prepare.sh [--node-llama-cpp VERSION]
#
# Needs git, Go and Node (for the case list); takes the bundle from
# engine.sh's cache or from the harness's node_modules.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
harness="$repo/conformance/harness"
out="$repo/.gpu"
version="$(node -p "require('$harness/package.json').dependencies['node-llama-cpp']")"
while (($#)); do
	case "$1" in
	--node-llama-cpp) version="$2"; shift 2 ;;
	*) echo "prepare.sh: unknown argument $1 (want: [--node-llama-cpp VERSION])" >&2; exit 2 ;;
	esac
done
log() { echo "prepare.sh: $*" >&2; }
start=$SECONDS

# The bundle and its release tag: engine.sh's cache first (it keeps one
# per node-llama-cpp version), else the installed package's.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/headroom/engine"
bundle="$cache/node-llama-cpp-$version.bundle"
info="$cache/node-llama-cpp-$version.info.json"
if [[ ! -s $bundle ]]; then
	installed="$(node -p "try { require('$harness/node_modules/node-llama-cpp/package.json').version } catch { '' }")"
	[[ $installed == "$version" ]] || { log "no bundle of node-llama-cpp $version: run conformance/engine.sh cpu --node-llama-cpp $version (or npm ci in $harness) first"; exit 2; }
	bundle="$harness/node_modules/node-llama-cpp/llama/gitRelease.bundle"
	info="$harness/node_modules/node-llama-cpp/llama/llama.cpp.info.json"
fi
release="$(node -p "require('$info').tag")"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git clone -q "$bundle" "$tmp/src" 2>/dev/null
commit="$(git -C "$tmp/src" rev-parse HEAD)"
# llama.cpp's CMake names a build by `git rev-parse --short HEAD` and
# `git rev-list --count HEAD`; a tarball has no history, so device.sh
# passes these on and llama-server --version reads as engine.sh's build.
short="$(git -C "$tmp/src" rev-parse --short=7 HEAD)"
number="$(git -C "$tmp/src" rev-list --count HEAD)"

rm -rf "$out"
mkdir -p "$out"

# What a llama-server build reads: the CMake tree (every tools/ folder is
# configured, so each stays), ggml with only the CPU, CUDA and RPC
# backends, the vendored libraries. Left out: test and documentation
# data, the UI's sources (-DLLAMA_BUILD_UI=OFF builds a placeholder) and
# the other backends (ggml adds a backend's folder only when it is on).
exclude=(models docs media gguf-py conversion benches tests examples pocs .github ci skills requirements grammars
	tools/ui/src tools/ui/tests)
for b in blas cann et hexagon hip metal musa opencl openvino sycl virtgpu vulkan webgpu zdnn zendnn; do
	exclude+=("ggml/src/ggml-$b")
done
pathspec=(.)
for e in "${exclude[@]}"; do pathspec+=(":(exclude)$e"); done
git -C "$tmp/src" archive --format=tar --prefix=llama.cpp/ HEAD -- "${pathspec[@]}" | gzip -9 >"$out/llama-src.tar.gz"

cat >"$out/source.env" <<ENV
# The llama.cpp source in llama-src.tar.gz (conformance/gpu/prepare.sh).
LLAMA_COMMIT=$commit
LLAMA_SHORT=$short
LLAMA_BUILD_NUMBER=$number
LLAMA_RELEASE=$release
NODE_LLAMA_CPP=$version
ENV

# Static, stripped: the GPU machine has no Go and may have another libc.
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/synthgen" ./conformance/cmd/synthgen)

# The case list, with the sizes of the synth files (written sparse into
# the harness's usual work folder here).
node "$here/caselist.mjs" --synthgen "$out/synthgen" --work "${TMPDIR:-/tmp}/headroom-conformance" >"$out/cases.tsv"

total="$(du -sb "$out" | cut -f1)"
log "$out: $(cd "$out" && du -h -- * | awk '{printf "%s %s  ", $2, $1}')"
log "$(($(wc -l <"$out/cases.tsv") - 1)) cases, llama.cpp $short (build $number, $release); $((total >> 20)) MiB to carry, made in $((SECONDS - start))s"
# The run tool sends the working tree and the carried folders, 64 MiB at
# most; the tracked files take about 14 MiB of it.
if ((total > 40 << 20)); then
	log "that is more than 40 MiB: the working tree and .gpu together may not fit the 64 MiB the run tool sends"
	exit 1
fi
