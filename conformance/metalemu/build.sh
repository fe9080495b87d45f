#!/usr/bin/env bash
# build.sh BUILD: links a llama-server whose CPU backend runs the Metal
# backend's graph optimizer (shim.cpp), from the CPU engine build of BUILD
# (80fb11a or de3ff81) that conformance/engine.sh left in the cache, and
# prints its path. Nothing is recompiled but the shim and the Metal
# backend's optimizer sources (plain C++, no Metal needed); the engine's
# own objects are relinked with -Wl,--wrap=ggml_backend_sched_new.
set -euo pipefail
build="${1:?usage: build.sh 80fb11a|de3ff81}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
eng="${XDG_CACHE_HOME:-$HOME/.cache}/headroom/engine/$build-cpu"
[[ -d $eng/build && -d $eng/src ]] || { echo "build.sh: no engine build at $eng (run conformance/engine.sh cpu for $build first)" >&2; exit 2; }
out="${METALEMU_DIR:-/tmp/headroom-metalemu}/$build"
mkdir -p "$out"
src="$eng/src/ggml"
inc=(-I"$src/include" -I"$src/src")
objs=("$out/shim.o" "$out/common.o")
defs=()
if [[ -f $src/src/ggml-metal/ggml-metal-fusion.cpp ]]; then
	# newer builds keep the fusion table apart; its allocation
	# dependencies are part of the optimizer
	defs=(-DMETAL_FUSION)
	g++ -O2 -std=c++17 -c "${inc[@]}" -o "$out/fusion.o" "$src/src/ggml-metal/ggml-metal-fusion.cpp"
	objs+=("$out/fusion.o")
fi
g++ -O2 -std=c++17 "${defs[@]}" -c "${inc[@]}" -o "$out/shim.o" "$here/shim.cpp"
g++ -O2 -std=c++17 -c "${inc[@]}" -o "$out/common.o" "$src/src/ggml-metal/ggml-metal-common.cpp"
libs=$(grep -A3 '^build bin/llama-server:' "$eng/build/build.ninja" | sed -n 's/^ *LINK_LIBRARIES = //p')
(cd "$eng/build" && g++ -O3 -DNDEBUG tools/server/CMakeFiles/llama-server.dir/main.cpp.o "${objs[@]}" \
	-o "$out/llama-server" -Wl,--wrap=ggml_backend_sched_new $libs)
echo "$out/llama-server"
