#!/usr/bin/env bash
# allocdebug.sh JOB.json [vulkan|cpu]
#
# Runs one harness job with a libggml-base.so rebuilt from the engine's own
# source with ggml-alloc's tracing on (GGML_ALLOCATOR_DEBUG and AT_PRINTF):
# every allocation, free and in-place reuse of the compute graph reaches
# the job's "lines", with the offset the allocator chose. Comparing that
# sequence with headroom's replay finds the first step where they part.
# The shipped library is put back when the job ends, whatever happens.
#
# Needs gcc and g++ (nothing else: ggml-base has no dependencies) and the
# harness installed (npm ci in conformance/harness).
set -euo pipefail

job=${1:?usage: allocdebug.sh JOB.json [vulkan|cpu]}
backend=${2:-vulkan}
here=$(cd "$(dirname "$0")" && pwd)
harness=$here/harness
mods=$harness/node_modules
case $backend in
vulkan) bins=$mods/@node-llama-cpp/linux-x64-vulkan/bins/linux-x64-vulkan ;;
cpu) bins=$mods/@node-llama-cpp/linux-x64/bins/linux-x64 ;;
*) echo "backend must be vulkan or cpu, not $backend" >&2; exit 2 ;;
esac
[ -f "$bins/libggml-base.so" ] || { echo "no $bins/libggml-base.so: run npm ci in $harness first" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$work/llama.cpp
git -c advice.detachedHead=false clone -q "$mods/node-llama-cpp/llama/gitRelease.bundle" "$src"
s=$src/ggml/src
version=$(strings "$bins/libggml-base.so" | awk '/^[0-9]+\.[0-9]+\.[0-9]+$/ { print; exit }' || true)
version=${version:-0.0.0}
printf '#pragma once\n#define GGML_VERSION "%s"\n#define GGML_COMMIT "%s"\n' "$version" "$(git -C "$src" rev-parse --short HEAD)" >"$work/ggml-version.h"
sed 's|^#define AT_PRINTF(...)$|#define AT_PRINTF(...) GGML_LOG_DEBUG(__VA_ARGS__)|' "$s/ggml-alloc.c" >"$work/ggml-alloc.c"
flags=(-O2 -fPIC -DGGML_BUILD -DGGML_SHARED -DGGML_BACKEND_SHARED -DGGML_BACKEND_BUILD -DGGML_BACKEND_DL
	-DGGML_ALLOCATOR_DEBUG -D_GNU_SOURCE -w "-I$s" "-I$src/ggml/include" "-I$work")
echo "building libggml-base.so with allocator tracing ($version)" >&2
gcc -std=gnu11 "${flags[@]}" -c "$s/ggml.c" -o "$work/ggml_c.o"
gcc -std=gnu11 "${flags[@]}" -c "$work/ggml-alloc.c" -o "$work/alloc.o"
gcc -std=gnu11 "${flags[@]}" -c "$s/ggml-quants.c" -o "$work/quants.o"
for f in ggml.cpp ggml-backend.cpp ggml-backend-meta.cpp ggml-opt.cpp ggml-threading.cpp gguf.cpp; do
	g++ -std=gnu++17 "${flags[@]}" -c "$s/$f" -o "$work/${f%.cpp}_cpp.o"
done
g++ -shared -Wl,-soname,libggml-base.so -o "$work/libggml-base.so" "$work"/*.o -lm

cp "$bins/libggml-base.so" "$work/libggml-base.so.shipped"
trap 'cp "$work/libggml-base.so.shipped" "$bins/libggml-base.so"; rm -rf "$work"' EXIT
cp "$work/libggml-base.so" "$bins/libggml-base.so"
(cd "$harness" && GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0} node load.mjs "$job")
