#!/usr/bin/env bash
# engine.sh builds llama.cpp's own programs (llama-server, llama-fit-params,
# llama-bench, llama-quantize, ggml-rpc-server) from the llama.cpp source that a
# pinned node-llama-cpp release ships, caches them by commit, backend and
# recipe, and prints the folder that holds the binaries (the only line on
# stdout).
#
#   conformance/engine.sh cpu                      # the pinned release (harness/package.json)
#   conformance/engine.sh vulkan
#   conformance/engine.sh cpu --node-llama-cpp 3.22.1
#
# node-llama-cpp ships the source it was built from as
# llama/gitRelease.bundle (one squashed commit); the tarball comes from the
# npm registry with `npm pack`, nothing else is downloaded. Cache:
# $XDG_CACHE_HOME/headroom/engine/COMMIT-BACKEND (or ~/.cache/...). A
# finished build leaves a stamp naming its recipe; an interrupted one is
# resumed.
#
# Needs cmake, ninja, a C++ compiler; Vulkan also needs libvulkan-dev, glslc,
# spirv-headers and mesa-vulkan-drivers. Missing Debian packages are
# installed with apt-get when running as root.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
backend="${1:-}"
shift || true
version="$(node -p "require('$here/harness/package.json').dependencies['node-llama-cpp']")"
while (($#)); do
	case "$1" in
	--node-llama-cpp) version="$2"; shift 2 ;;
	*) echo "engine.sh: unknown argument $1 (want: cpu|vulkan [--node-llama-cpp VERSION])" >&2; exit 2 ;;
	esac
done
case "$backend" in
cpu | vulkan) ;;
*) echo "engine.sh: first argument must be the backend, cpu or vulkan (got '${backend}')" >&2; exit 2 ;;
esac

log() { echo "engine.sh: $*" >&2; }

need_pkgs=(cmake ninja-build g++ git)
[[ $backend == vulkan ]] && need_pkgs+=(libvulkan-dev glslc spirv-headers mesa-vulkan-drivers)
missing=()
for p in "${need_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
	[[ $(id -u) == 0 ]] || { log "missing Debian packages: ${missing[*]} (install them, or run as root)"; exit 2; }
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "${missing[@]}" >&2 || { apt-get update -qq >&2 && apt-get install -y -qq "${missing[@]}" >&2; }
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/headroom/engine"
mkdir -p "$cache"

# The bundle of this node-llama-cpp version, kept beside the builds, and
# its llama.cpp.info.json (the release tag it names), which the harness
# records with every measurement of a build.
bundle="$cache/node-llama-cpp-$version.bundle"
info="$cache/node-llama-cpp-$version.info.json"
if [[ ! -s $bundle || ! -s $info ]]; then
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	log "fetching node-llama-cpp $version's llama.cpp source (npm pack)"
	for try in 1 2 3; do
		(cd "$tmp" && npm pack --silent "node-llama-cpp@$version" >/dev/null) && break
		[[ $try == 3 ]] && { log "npm pack node-llama-cpp@$version failed three times"; exit 1; }
		sleep $((try * 10))
	done
	tar -xzf "$tmp"/node-llama-cpp-*.tgz -C "$tmp" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
	mv "$tmp/package/llama/llama.cpp.info.json" "$info"
	mv "$tmp/package/llama/gitRelease.bundle" "$bundle.part"
	mv "$bundle.part" "$bundle"
fi
commit="$(git bundle list-heads "$bundle" | awk 'NR==1{print $1}')"
short="${commit:0:7}"
out="$cache/$short-$backend"

# The CMake options every build shares (engine-flags.sh, which says why
# the CPU features are pinned).
# shellcheck source=engine-flags.sh
source "$here/engine-flags.sh"
flags=("${engine_flags[@]}")
patches=()
if [[ $backend == vulkan ]]; then
	flags+=(-DGGML_VULKAN=ON)
	# Debian bookworm's Vulkan headers predate vk::LayerSettingEXT; the
	# patch only compiles the validation-layer settings out (see
	# engine-patches/README.md). Applied only where the headers need it.
	hv="$(awk '/#define VK_HEADER_VERSION /{print $3; exit}' /usr/include/vulkan/vulkan_core.h)"
	if ((hv < 261)); then
		patches=("$here"/engine-patches/vulkan-*.patch)
	fi
	# A build's own patches (COMMIT-vulkan-*.patch) are for a glslc
	# without cooperative-matrix support (bookworm's), which that
	# build's shader generator does not check for everywhere.
	if ! printf '#version 450\n#extension GL_KHR_cooperative_matrix : require\nvoid main() {}\n' |
		glslc -fshader-stage=compute --target-env=vulkan1.3 -o /dev/null - 2>/dev/null; then
		for p in "$here"/engine-patches/"$short"-vulkan-*.patch; do
			[[ -e $p ]] && patches+=("$p")
		done
	fi
fi
targets=(llama-server llama-fit-params llama-bench llama-quantize ggml-rpc-server)

# The recipe is what decides the binaries: the source, the flags, the
# targets and the patches' text. A build made by another recipe is not
# reused; one interrupted under this recipe is resumed (ninja rebuilds
# only what is missing).
recipe="$( (echo "$commit ${flags[*]} ${targets[*]}"; cat "${patches[@]}" /dev/null) | sha256sum | cut -c1-16)"
if [[ -x $out/bin/llama-server && "$(cat "$out/.built" 2>/dev/null)" == *"recipe $recipe"* ]]; then
	echo "$out/bin"
	exit 0
fi

# Build beside the finished one and swap at the end, so a program running
# from the old build keeps its files until then.
work="$out.building"
start=$SECONDS
if [[ "$(cat "$work/.recipe" 2>/dev/null)" != "$recipe" ]]; then
	log "building llama.cpp $short ($backend) into $out"
	rm -rf "$work"
	mkdir -p "$work"
	git clone -q "$bundle" "$work/src" 2>/dev/null
	git -C "$work/src" -c advice.detachedHead=false checkout -q "$commit"
	for p in "${patches[@]}"; do
		git -C "$work/src" apply "$p" || { log "patch $(basename "$p") does not apply to $short"; exit 1; }
		log "applied $(basename "$p") (engine-patches/README.md says when and why)"
	done
	cmake -S "$work/src" -B "$work/build" "${flags[@]}" >"$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log" >&2; exit 1; }
	echo "$recipe" >"$work/.recipe"
else
	log "resuming the interrupted build of llama.cpp $short ($backend) in $work"
fi
cmake --build "$work/build" -j "$(nproc)" --target "${targets[@]}" >>"$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; exit 1; }
mkdir -p "$work/bin"
for t in "${targets[@]}"; do cp "$work/build/bin/$t" "$work/bin/"; done
"$work/bin/llama-server" --version >"$work/version.txt" 2>&1 || true
echo "$commit $backend node-llama-cpp@$version recipe $recipe" >"$work/.built"
rm -rf "$out.old"
[[ -e $out ]] && mv "$out" "$out.old"
mv "$work" "$out"
rm -rf "$out.old"
log "built in $((SECONDS - start))s: $(head -1 "$out/version.txt")"
echo "$out/bin"
