package cli

import (
	"context"
	"fmt"
	"github.com/headroom-llm/headroom/request"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan"
)

// companionFlags registers llama-server's flags for a multimodal projector
// and a speculative-decoding draft (shared by fit and plan), and returns a
// function that opens what they name after parsing: nil when neither is
// given. A draft whose vocabulary llama.cpp would refuse beside target
// (when its header is known) is refused here.
func companionFlags(fs *flags) func(ctx context.Context, env Env, quiet bool, target *gguf.Model) (*plan.Companions, error) {
	var mmproj, draft string
	var noOffload bool
	var imageMin, imageMax int
	ngld := &request.GPULayers{N: plan.GPULayersAuto}
	fs.StringVar(&mmproj, "mm", "", "a multimodal projector (mmproj GGUF: a path, URL or hf: reference) loaded beside the model; its memory is counted, and the plan's flags pass it on as given (llama-server needs a local file)")
	fs.alias("mm", "mmproj")
	fs.BoolVar(&noOffload, "no-mmproj-offload", false, "keep the projector in system memory")
	fs.Bool("mmproj-offload", true, "offload the projector with the model (the default)")
	fs.IntVar(&imageMin, "image-min-tokens", 0, "the fewest tokens the projector encodes an image to (passed on; gemma3, pixtral and Qwen2/2.5-VL projectors, whose buffers at load it leaves as they are)")
	fs.IntVar(&imageMax, "image-max-tokens", 0, "the most tokens the projector encodes an image to (as --image-min-tokens)")
	fs.StringVar(&draft, "md", "", "a speculative-decoding draft model (a path, URL or hf: reference); its weights and one context per slot are counted, and the plan's flags pass it on as given (llama-server needs a local file)")
	fs.alias("md", "model-draft", "spec-draft-model")
	fs.Var(ngld, "ngld", "the draft's layers on the GPU: a number, auto or all")
	// fit and plan, which take companions, read a joined machine from a
	// file; serve joins rpc-servers itself (its --rpc).
	refuseHere(fs, "fit and plan read a machine joined over RPC from a file: headroom hw --rpc HOST:PORT --json > m.json, then --machine m.json; headroom serve --rpc joins the rpc-servers itself", "rpc")
	fs.alias("ngld", "gpu-layers-draft", "n-gpu-layers-draft", "spec-draft-ngl")
	return func(ctx context.Context, env Env, quiet bool, target *gguf.Model) (*plan.Companions, error) {
		if imageMin < 0 || imageMax < 0 || (imageMax > 0 && imageMin > imageMax) {
			return nil, usagef("--image-min-tokens %d and --image-max-tokens %d: want counts of at least 1, the least no more than the most", imageMin, imageMax)
		}
		if mmproj == "" && (noOffload || imageMin > 0 || imageMax > 0) {
			return nil, usagef("--no-mmproj-offload and --image-min/max-tokens need --mmproj")
		}
		if mmproj == "" && draft == "" {
			if ngld.N != plan.GPULayersAuto {
				return nil, usagef("-ngld needs -md")
			}
			return nil, nil
		}
		c := &plan.Companions{ProjectorOnCPU: noOffload, DraftGPULayers: ngld.N, ImageMinTokens: imageMin, ImageMaxTokens: imageMax}
		if c.DraftGPULayers == request.GPULayersAll {
			c.DraftGPULayers = plan.GPULayersAuto
		}
		if mmproj != "" {
			h, err := openModel(ctx, env, mmproj, quiet)
			if err != nil {
				return nil, fmt.Errorf("--mmproj %s: %w", mmproj, err)
			}
			if c.Projector, err = arch.ProjectorFromGGUF(h.Model); err != nil {
				return nil, fmt.Errorf("--mmproj %s: %w", mmproj, err)
			}
			c.ProjectorName = mmproj
			if (imageMin > 0 || imageMax > 0) && !arch.ImageTokensKeepWarmup(c.Projector.Type) {
				return nil, usagef("--image-min/max-tokens with a %q projector: clip may warm it up at the bounds, which headroom has not measured for this type; it counts them for gemma3, pixtral, qwen2vl_merger and qwen2.5vl_merger projectors (leave them out to plan this one)", c.Projector.Type)
			}
		}
		if draft != "" {
			h, err := openModel(ctx, env, draft, quiet)
			if err != nil {
				return nil, fmt.Errorf("-md %s: %w", draft, err)
			}
			if c.Draft, err = arch.FromGGUF(h.Model); err != nil {
				return nil, fmt.Errorf("-md %s: %w", draft, err)
			}
			if target != nil {
				if err := arch.DraftCompatible(target, h.Model); err != nil {
					return nil, fmt.Errorf("-md %s: %w", draft, err)
				}
			}
			c.DraftName = draft
		} else if ngld.N != plan.GPULayersAuto {
			return nil, usagef("-ngld needs -md")
		}
		return c, nil
	}
}
