#!/usr/bin/env bash
# device.sh measures llama.cpp's CUDA backend on a borrowed NVIDIA GPU
# machine: it runs there (the run tool's command, in the repository root,
# with $OUT set and .gpu carried from prepare.sh), builds llama-server for
# CUDA from .gpu/llama-src.tar.gz unless an earlier call on the same warm
# machine left the build, then loads each case of .gpu/cases.tsv once
# (serve1.py) and appends its log and meta to $OUT/cuda-results.tar after
# EVERY case, so a call stopped at its time limit still returns what
# finished. gpu/import.mjs turns the tar into golden records here.
#
#   conformance/gpu/device.sh [--only REGEX] [--skip REGEX] [--budget SECONDS]
#                             [--skip-build] [--engine DIR] [--cpu] [--redo]
#
#   --only/--skip  extended regular expressions over case ids
#   --budget S     start no case after S seconds of this script (the build
#                  included) unless it should finish in time (default 500:
#                  a run timeout_s of 600 leaves room to stop and send)
#   --skip-build   use the build an earlier call left (fails if none)
#   --engine DIR   use the llama-server in DIR instead of building one
#   --cpu          a dry run of the whole pipeline with a CPU build: every
#                  case with -ngl 0 and no --n-cpu-moe, recorded as CPU
#   --redo         also run the cases an earlier call on this machine did
#
# Work folder: .gpu-work (git-ignored; the run tool keeps ignored files
# between calls while the machine stays warm, 30 s): the source, the
# build, the synthetic files and the ids of the cases done.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
carry="$repo/.gpu"
work="$repo/.gpu-work"
out="${OUT:-}"
only="" skip="" budget=500 skip_build=0 engine="" cpu=0 redo=0
while (($#)); do
	case "$1" in
	--only) only="$2"; shift 2 ;;
	--skip) skip="$2"; shift 2 ;;
	--budget) budget="$2"; shift 2 ;;
	--skip-build) skip_build=1; shift ;;
	--engine) engine="$2"; shift 2 ;;
	--cpu) cpu=1; shift ;;
	--redo) redo=1; shift ;;
	*) echo "device.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[[ -n $out ]] || { echo "device.sh: \$OUT is not set (the folder whose files come back)" >&2; exit 2; }
for f in llama-src.tar.gz source.env synthgen cases.tsv; do
	[[ -e $carry/$f ]] || { echo "device.sh: $carry/$f is missing: run conformance/gpu/prepare.sh here and carry .gpu" >&2; exit 2; }
done
mkdir -p "$out" "$work/gguf" "$work/case"
# Everything said also goes to $OUT/progress.log, which comes back even
# when the call's limit cuts the output short.
exec > >(tee -a "$out/progress.log") 2>&1
tee_pid=$!
# tee must have written everything before the call collects $OUT.
trap 'exec >&- 2>&-; wait "$tee_pid" 2>/dev/null || true' EXIT
# shellcheck source=/dev/null
source "$carry/source.env"

say() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }
results="$out/cuda-results.tar"
part=1
# add puts files (named relative to the folder $1) into the results
# tar; a tar nearing the 16 MiB a returned file may have is closed and
# the next one begun (8 files come back: this leaves room for 5 tars
# beside progress.log and env.txt).
add() {
	local dir="$1"
	shift
	if [[ -e $results ]] && (($(stat -c %s "$results") > 14 << 20)); then
		part=$((part + 1))
		results="$out/cuda-results-$part.tar"
	fi
	tar -rf "$results" -C "$dir" "$@"
}

# What the machine is: the records name the GPU and its driver, and
# import.mjs reads the GPU's memory from here.
{
	echo "== date"; date -u +%FT%TZ
	echo "== uname"; uname -a
	echo "== nvidia-smi"; nvidia-smi 2>&1 || true
	echo "== nvidia-smi query"
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,memory.free,compute_cap --format=csv 2>&1 || true
	echo "== nvcc"; (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 || true
	echo "== cpu"; grep -m1 'model name' /proc/cpuinfo || true; nproc
	echo "== memory"; free -m || true
	echo "== disk"; df -h "$work" || true
	echo "== source"; cat "$carry/source.env"
} >"$work/env.txt" 2>&1
cp "$work/env.txt" "$out/env.txt"
add "$work" env.txt
if nvidia-smi -L >/dev/null 2>&1; then
	say "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
elif ((!cpu)); then
	echo "device.sh: no NVIDIA GPU answers (nvidia-smi -L failed); --cpu --engine DIR is the dry run without one" >&2
	exit 2
fi

# The build: engine.sh's CMake options (engine-flags.sh) with the CUDA
# backend for this GPU's architecture only (sm_90, Hopper: H100/H200),
# which keeps the compile to a few minutes on 16 cores. llama.cpp's CMake
# names the build from git, which a tarball lacks: the number and commit
# prepare.sh read from the bundle make --version print what engine.sh's
# builds print, so headroom identifies the build (engine.Identify).
if [[ -n $engine ]]; then
	bin="$engine/llama-server"
elif ((cpu)); then
	echo "device.sh: --cpu needs --engine DIR (a CPU build of the same source)" >&2
	exit 2
else
	bin="$work/build/bin/llama-server"
	# shellcheck source=../engine-flags.sh
	source "$repo/conformance/engine-flags.sh"
	if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
		export PATH="/usr/local/cuda/bin:$PATH"
	fi
	cmake_flags=("${engine_flags[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
		-DLLAMA_BUILD_NUMBER="$LLAMA_BUILD_NUMBER" -DLLAMA_BUILD_COMMIT="$LLAMA_SHORT")
	recipe="$( (sha256sum <"$carry/llama-src.tar.gz"; echo "${cmake_flags[*]}") | sha256sum | cut -c1-16)"
	if [[ -x $bin && "$(cat "$work/build.stamp" 2>/dev/null)" == "$recipe" ]]; then
		say "build $recipe is here from an earlier call"
	elif ((skip_build)); then
		echo "device.sh: --skip-build, but no finished build of recipe $recipe in $work/build" >&2
		exit 2
	else
		# A build cut short by the call's limit resumes where ninja left it.
		if [[ "$(cat "$work/src.recipe" 2>/dev/null)" != "$recipe" ]]; then
			rm -rf "$work/llama.cpp" "$work/build" "$work/build.stamp"
			tar -xzf "$carry/llama-src.tar.gz" -C "$work"
			echo "$recipe" >"$work/src.recipe"
		fi
		say "building llama-server for CUDA (recipe $recipe, $(nproc) jobs)"
		t=$SECONDS
		cmake -S "$work/llama.cpp" -B "$work/build" "${cmake_flags[@]}" >"$work/cmake.log" 2>&1 || { tail -40 "$work/cmake.log"; cp "$work/cmake.log" "$out/"; exit 1; }
		# In the background, to say every minute how far it got: a call
		# cut short mid-build shows what the next one resumes.
		cmake --build "$work/build" -j "$(nproc)" --target llama-server llama-fit-params >"$work/build.log" 2>&1 &
		build_pid=$!
		while kill -0 "$build_pid" 2>/dev/null; do
			sleep 10
			if (((SECONDS - t) % 60 < 10)); then
				say "building: $(grep -o '^\[[0-9]*/[0-9]*\]' "$work/build.log" | tail -1)"
			fi
		done
		wait "$build_pid" || {
			tail -40 "$work/build.log"
			gzip -c "$work/build.log" >"$out/build.log.gz"
			exit 1
		}
		echo "$recipe" >"$work/build.stamp"
		say "built in $((SECONDS - t))s"
	fi
fi
[[ -x $bin ]] || { echo "device.sh: no llama-server at $bin" >&2; exit 2; }
"$bin" --version >"$work/version.txt" 2>&1 || true
say "$(head -1 "$work/version.txt")"
add "$work" version.txt

# Sparse files: synthgen leaves the weights as holes, so a 110 GiB file
# takes a few MiB of disk, where the filesystem keeps holes. Where it does
# not, a file must fit the free disk.
probe="$work/sparse.probe"
truncate -s 1G "$probe"
sparse=1
(($(du -k "$probe" | cut -f1) < 1024)) || sparse=0
rm -f "$probe"
((sparse)) || say "this filesystem does not keep holes: cases whose file does not fit the free disk are skipped"

# Cases measured, or failed, by an earlier call on this machine are not
# run again (--redo runs them): a second call carries on where the first
# stopped.
mode=cuda
((cpu)) && mode=cpu
done_list="$work/done-$mode.txt" failed_list="$work/failed-$mode.txt"
touch "$done_list" "$failed_list"
n=0 ok=0 failed=0 skipped=0 nodisk=0
total="$(grep -vc '^#' "$carry/cases.tsv")"
# The list is read on descriptor 3, so nothing in the loop eats it.
while IFS=$'\t' read -r -u 3 id spec size flagline; do
	[[ $id == \#* || -z $id ]] && continue
	n=$((n + 1))
	[[ -n $only && ! $id =~ $only ]] && continue
	[[ -n $skip && $id =~ $skip ]] && continue
	if ((!redo)) && grep -qxF "$id" "$done_list" "$failed_list"; then
		continue
	fi
	read -ra flags <<<"$flagline"
	if ((cpu)); then
		# The dry run: a CPU build places everything on the CPU whatever
		# -ngl says, and prints no offload summary; -ngl 0 and no
		# --n-cpu-moe make it exactly a CPU case's load.
		f2=()
		for ((i = 0; i < ${#flags[@]}; i++)); do
			case "${flags[$i]}" in
			-ngl) f2+=(-ngl 0); i=$((i + 1)) ;;
			--n-cpu-moe) i=$((i + 1)) ;;
			*) f2+=("${flags[$i]}") ;;
			esac
		done
		flags=("${f2[@]}")
	fi
	# A case should take a few seconds plus about a second per GiB of
	# file (the weights are read once, from holes); start none that
	# could not finish within the budget.
	need=$((20 + size / (1 << 30)))
	left=$((budget - SECONDS))
	if ((left < need)); then
		((skipped)) || say "[$n/$total] $id: not started, ${left}s of the budget left and it may need ${need}s; nor are the next ones that may not fit"
		skipped=$((skipped + 1))
		continue
	fi
	shape="${spec%%:*}" quant="${spec#*:}"
	gguf="$work/gguf/$shape.$quant.gguf"
	if ((!sparse)) && [[ ! -e $gguf ]]; then
		avail=$(($(df -k --output=avail "$work" | tail -1) * 1024))
		if ((size + (4 << 30) > avail)); then
			say "[$n/$total] $id: skipped, its $((size >> 30)) GiB file does not fit the free disk"
			nodisk=$((nodisk + 1))
			continue
		fi
	fi
	# synthgen leaves a file whose header already matches alone.
	"$carry/synthgen" -dir "$work/gguf" "$spec" >"$work/gguf/$shape.$quant.json"
	cdir="$work/case"
	rm -rf "$cdir" && mkdir -p "$cdir"
	cp "$work/gguf/$shape.$quant.json" "$cdir/$id.synth.json"
	# Ten minutes for any load; less where the budget ends sooner.
	timeout=$((left - 5))
	((timeout < 600)) || timeout=600
	t=$SECONDS
	rc=0
	python3 "$here/serve1.py" --bin "$bin" --model "$gguf" --log "$cdir/$id.log" --meta "$cdir/$id.meta.json" \
		--timeout "$timeout" -- "${flags[@]}" || rc=$?
	# The meta says which case it was and how it ran, for import.mjs.
	python3 - "$cdir/$id.meta.json" "$id" "$spec" "$((cpu ? 0 : 1))" <<'PY'
import json, sys
path, case_id, spec, gpu = sys.argv[1:]
try:
    meta = json.load(open(path))
except (OSError, ValueError):
    meta = {"ok": False, "error": "serve1.py left no meta (killed?)"}
meta.update({"id": case_id, "spec": spec, "backend": "cuda" if gpu == "1" else "cpu"})
json.dump(meta, open(path, "w"), indent=1)
PY
	gzip -f "$cdir/$id.log"
	add "$cdir" "$id.meta.json" "$id.synth.json" "$id.log.gz"
	bufs="$(zcat "$cdir/$id.log.gz" | grep -oE '[A-Za-z0-9_]+ +(model|KV|RS|compute|output) buffer size = +[0-9.]+ MiB' |
		sed -E 's/ +/ /; s/ buffer size = +/=/; s/ MiB$//' | tr '\n' ' ' || true)"
	if ((rc == 0)); then
		ok=$((ok + 1))
		echo "$id" >>"$done_list"
		say "[$n/$total] $id: ok in $((SECONDS - t))s: $bufs"
	else
		err="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("error"))' "$cdir/$id.meta.json")"
		if [[ $err == "not ready after"* ]] && ((timeout < 600)); then
			# The budget, not the load, ran out: the next call runs it.
			skipped=$((skipped + 1))
			say "[$n/$total] $id: cut short by the budget after $((SECONDS - t))s; the next call runs it again"
		else
			failed=$((failed + 1))
			echo "$id" >>"$failed_list"
			say "[$n/$total] $id: FAILED in $((SECONDS - t))s: $err"
			zcat "$cdir/$id.log.gz" | tail -5 | sed 's/^/    /'
		fi
	fi
done 3<"$carry/cases.tsv"
say "done: $ok measured, $failed failed, $skipped left for another call, $nodisk too big for the disk; on this machine $(wc -l <"$done_list") of $total cases measured, $(wc -l <"$failed_list") failed"
ls -l "$out"
