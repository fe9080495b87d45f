#!/usr/bin/env bash
# measure.sh BUILD [REGEX]: loads each case below with BUILD's CPU
# llama-server, stock and with the Metal backend's graph optimizer
# (build.sh), and writes what each printed of its compute buffer to
# plan/testdata/metalemu/BUILD.json (BUILD.partial.json when only some
# cases run), which TestMetalOptimizerOnCPU holds headroom to. The synth files go to
# $METALEMU_MODELS (default /tmp/headroom-metalemu/models); they are sparse.
set -euo pipefail
build="${1:?usage: measure.sh 80fb11a|de3ff81 [REGEX]}"
only="${2:-.}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
stock="${XDG_CACHE_HOME:-$HOME/.cache}/headroom/engine/$build-cpu/bin/llama-server"
emu="$("$here/build.sh" "$build")"
models="${METALEMU_MODELS:-/tmp/headroom-metalemu/models}"
mkdir -p "$models"
# id | shape:quant | llama-server flags besides -m (all run with -nr: weights
# stay mapped, so the sparse files need no memory; -np is always given, as
# llama-server's automatic choice is four unified slots)
cases=(
	"llama-3.1-8b-c4096|llama-3.1-8b:Q4_K_M|-c 4096 -fa off -np 1"
	"llama-3.1-8b-c4096-fa|llama-3.1-8b:Q4_K_M|-c 4096 -fa on -np 1"
	"llama-3.2-1b-c8192x4|llama-3.2-1b:Q8_0|-c 8192 -np 4 -fa off"
	"llama-3.2-1b-c8192x4-fa|llama-3.2-1b:Q8_0|-c 8192 -np 4 -fa on"
	"qwen3-8b-c4096|qwen3-8b:Q4_K_M|-c 4096 -fa off -np 1"
	"qwen3-8b-c4096-fa|qwen3-8b:Q4_K_M|-c 4096 -fa on -np 1"
	"gemma-3-4b-c8192|gemma-3-4b:Q4_K_M|-c 8192 -fa off -np 1"
	"gemma-3-4b-c8192-fa|gemma-3-4b:Q4_K_M|-c 8192 -fa on -np 1"
	"gemma-2-2b-c4096|gemma-2-2b:Q8_0|-c 4096 -fa off -np 1"
	"phi-3-mini-c4096|phi-3-mini-4k:Q8_0|-c 4096 -fa off -np 1"
	"command-r7b-c4096-fa|command-r7b:Q4_K_M|-c 4096 -fa on -np 1"
	"olmo-2-1b-c4096|olmo-2-1b:Q8_0|-c 4096 -fa off -np 1"
	"qwen3-30b-a3b-c4096|qwen3-30b-a3b:Q4_K_M|-c 4096 -fa off -np 1"
	"qwen3-30b-a3b-c4096-fa|qwen3-30b-a3b:Q4_K_M|-c 4096 -fa on -np 1"
	"gpt-oss-20b-c4096|gpt-oss-20b:MXFP4_MOE|-c 4096 -fa off -np 1"
	"gpt-oss-20b-c4096-fa|gpt-oss-20b:MXFP4_MOE|-c 4096 -fa on -np 1"
	"qwen1.5-moe-c4096-fa|qwen1.5-moe-a2.7b:Q4_K_M|-c 4096 -fa on -np 1"
	"deepseek-v2-lite-c4096|deepseek-v2-lite:Q4_K_M|-c 4096 -fa off -np 1"
	"deepseek-v2-lite-c4096-fa|deepseek-v2-lite:Q4_K_M|-c 4096 -fa on -np 1"
	"glm-4.5-air-c4096-fa|glm-4.5-air:Q4_K_M|-c 4096 -fa on -np 1"
	"qwen3-next-c4096-fa|qwen3-next-80b-a3b:Q4_K_M|-c 4096 -fa on -np 1"
	"lfm2-1.2b-c4096-fa|lfm2-1.2b:Q8_0|-c 4096 -fa on -np 1"
	"mamba2-130m-c4096|mamba2-130m:Q8_0|-c 4096 -np 1"
	"granite-4.0-h-micro-c4096-fa|granite-4.0-h-micro:Q8_0|-c 4096 -fa on -np 1"
	"nemotron-h-4b-c4096-fa|nemotron-h-4b:Q8_0|-c 4096 -fa on -np 1"
	"falcon-h1-0.5b-c4096-fa|falcon-h1-0.5b:Q8_0|-c 4096 -fa on -np 1"
	"gemma-3n-e2b-c4096-fa|gemma-3n-e2b:Q8_0|-c 4096 -fa on -np 1"
	"granite-3.3-2b-c4096|granite-3.3-2b:Q8_0|-c 4096 -fa off -np 1"
	"pythia-1.4b-c2048|pythia-1.4b:Q8_0|-c 2048 -fa off -np 1"
	"ministral-3-3b-c16384-fa|ministral-3-3b:Q8_0|-c 16384 -fa on -np 1"
)
figures() { # BIN MODEL FLAGS...: "MiB nodes" of the CPU compute buffer
	local bin=$1 model=$2; shift 2
	local log; log=$(mktemp)
	local port=$((20000 + RANDOM % 20000))
	"$bin" -m "$model" "$@" -nr --no-warmup --port "$port" -lv 5 >"$log" 2>&1 &
	local pid=$!
	# Until it listens (or gives up); stopping it then prints the compute
	# buffer to four decimals as the context is freed.
	for _ in $(seq 1 600); do
		grep -q "listening on" "$log" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	local mib nodes
	# Four decimals as the context is freed; a server that stops at once
	# leaves the reserve's two.
	mib=$(grep -m1 -o 'CPU compute buffer size is *[0-9.]* MiB' "$log" | grep -o '[0-9.]* MiB' | cut -d' ' -f1)
	[[ -n $mib ]] || mib=$(grep -m1 -o 'CPU compute buffer size = *[0-9.]* MiB' "$log" | grep -o '[0-9.]* MiB' | cut -d' ' -f1)
	nodes=$(grep -m1 -oE '(graph nodes|graph: nodes) *= *[0-9]+' "$log" | grep -o '[0-9]*$')
	if [[ -z $mib || -z $nodes ]]; then
		echo "measure.sh: $model $*: no compute buffer line (log: $log)" >&2
		return 1
	fi
	rm -f "$log"
	echo "$mib $nodes"
}
out="$root/plan/testdata/metalemu/$build.json"
[[ $only == . ]] || out="${out%.json}.partial.json"
mkdir -p "$(dirname "$out")"
tmp=$(mktemp)
echo "[" >"$tmp"
first=1
for c in "${cases[@]}"; do
	IFS='|' read -r id spec flags <<<"$c"
	[[ $id =~ $only ]] || continue
	file=$(cd "$root" && go run ./conformance/cmd/synthgen -dir "$models" "$spec" | grep -o '"path": *"[^"]*"' | cut -d'"' -f4)
	read -r smib snodes < <(figures "$stock" "$file" $flags)
	read -r emib enodes < <(figures "$emu" "$file" $flags)
	echo "measure.sh: $id: stock $smib MiB ($snodes nodes), Metal optimizer $emib MiB ($enodes nodes)" >&2
	((first)) || echo "," >>"$tmp"
	first=0
	printf '  {"id": "%s", "model": "%s", "flags": "%s", "stock_mib": "%s", "metal_mib": "%s", "nodes": %s}' \
		"$id" "$spec" "$flags" "$smib" "$emib" "$snodes" >>"$tmp"
done
printf '\n]\n' >>"$tmp"
mv "$tmp" "$out"
echo "$out"
