// Runs the Metal backend's graph optimizer (ggml-metal-common.cpp, and in
// newer builds its fusion table's allocation dependencies) on the CPU
// backend's splits, so that a CPU build of llama-server reports the compute
// buffer the Metal reorder leads to. Linked into llama-server with
// -Wl,--wrap=ggml_backend_sched_new.
#include "ggml-backend-impl.h"
#include "ggml-metal/ggml-metal-common.h"
#ifdef METAL_FUSION
#include "ggml-metal/ggml-metal-fusion.h"
#include "ggml-metal/ggml-metal-device.h"
extern "C" struct ggml_metal_buffer_id ggml_metal_buffer_get_id(ggml_metal_buffer_t, const struct ggml_tensor *) {
    return {nullptr, 0}; // only the encoders' full checks ask
}
#endif
#include <cstring>
#include <cstdio>

extern "C" ggml_backend_sched_t __real_ggml_backend_sched_new(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts, int n_backends, size_t graph_size, bool parallel, bool op_offload);

static void metal_optimize(ggml_backend_t, ggml_cgraph * cgraph, ggml_backend_graph_optimize_params * params) {
#ifdef METAL_FUSION
    ggml_metal_fusion_add_alloc_deps(params->user_data, params->add_alloc_dep, cgraph);
#else
    (void) params;
#endif
    ggml_graph_optimize(cgraph);
}

extern "C" ggml_backend_sched_t __wrap_ggml_backend_sched_new(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts, int n_backends, size_t graph_size, bool parallel, bool op_offload) {
    for (int i = 0; i < n_backends; i++) {
        if (strcmp(ggml_backend_name(backends[i]), "CPU") == 0) {
            backends[i]->iface.graph_optimize = metal_optimize;
            fprintf(stderr, "metal-emu: CPU backend runs the Metal graph optimizer\n");
        }
    }
    return __real_ggml_backend_sched_new(backends, bufts, n_backends, graph_size, parallel, op_offload);
}
