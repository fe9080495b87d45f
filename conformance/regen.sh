#!/usr/bin/env bash
# regen.sh measures llama.cpp on every conformance case and rewrites the
# golden files; with --check it re-measures and fails if any figure differs
# from the committed files (engine drift, or a synth change that was not
# regenerated).
#
#   conformance/regen.sh                    # llama-server loads -> testdata/server
#   conformance/regen.sh --driver library   # node-llama-cpp contexts -> testdata/golden
#   conformance/regen.sh --check            # compare, write nothing
#   conformance/regen.sh --only gemma       # a subset (regex over case ids)
#   conformance/regen.sh --backend cpu      # skip the Vulkan cases
#
# Other flags go to harness/run.mjs (--engine DIR, --limit N, --missing,
# --no-estimate, --work DIR, --golden DIR, --cases FILE). Needs Go, Node >=
# 20 and npm; the first run installs node-llama-cpp (pinned, from
# package-lock.json), builds llama-server with conformance/engine.sh (the
# CPU build took 645-878 s here, Vulkan longer; cached) and, for Vulkan
# cases, installs Mesa's software Vulkan driver (apt-get, as root).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
harness="$here/harness"
start=$SECONDS

want_version="$(node -p "require('$harness/package.json').dependencies['node-llama-cpp']")"
have_version="$(node -p "try { require('$harness/node_modules/node-llama-cpp/package.json').version } catch { '' }" 2>/dev/null || true)"
if [[ "$have_version" != "$want_version" ]]; then
	echo "regen: installing node-llama-cpp $want_version (npm ci)"
	# A registry hiccup should not fail a CI run: three tries.
	for try in 1 2 3; do
		(cd "$harness" && npm ci --no-audit --no-fund) && break
		[[ $try == 3 ]] && { echo "regen: npm ci failed three times" >&2; exit 1; }
		echo "regen: npm ci failed (try $try of 3), again in $((try * 10))s" >&2
		sleep $((try * 10))
	done
fi

# Vulkan runs on Mesa's llvmpipe; it is needed unless only CPU cases run.
need_vulkan=1
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	if [[ "${args[$i]}" == "--backend" && "${args[$((i + 1))]:-}" == "cpu" ]]; then
		need_vulkan=0
	fi
done
if [[ $need_vulkan == 1 ]] && ! dpkg -s mesa-vulkan-drivers libvulkan1 >/dev/null 2>&1; then
	echo "regen: installing mesa-vulkan-drivers and libvulkan1 for the Vulkan cases"
	sudo=""
	if [[ $(id -u) != 0 ]]; then
		command -v sudo >/dev/null || { echo "regen: need root (or sudo) to apt-get install mesa-vulkan-drivers libvulkan1; or pass --backend cpu" >&2; exit 2; }
		sudo=sudo
	fi
	$sudo apt-get install -y mesa-vulkan-drivers libvulkan1 || { $sudo apt-get update && $sudo apt-get install -y mesa-vulkan-drivers libvulkan1; }
fi

status=0
node "$harness/run.mjs" "$@" || status=$?
echo "regen: finished in $((SECONDS - start))s (status $status)"
exit $status
