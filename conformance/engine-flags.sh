# engine-flags.sh is sourced by engine.sh and gpu/device.sh: the CMake
# options of every llama.cpp build the goldens are measured with, so that
# a CUDA build on a borrowed machine differs from the CPU and Vulkan
# builds here only in its backend.
#
# The CPU features are pinned to the ones node-llama-cpp's prebuilt x64
# binaries report (SSE3 SSSE3 AVX AVX2 F16C FMA BMI2), not -march=native:
# the CPU backend's repacked layouts depend on them (so the goldens would
# depend on the machine), and a native build has died with SIGILL on a VM
# that advertises AMX and AVX-512 it does not fully provide.
# shellcheck disable=SC2034 # used by the scripts that source this file
engine_flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
	-DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DBUILD_SHARED_LIBS=OFF
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
	-DLLAMA_OPENSSL=OFF -DGGML_RPC=ON)
