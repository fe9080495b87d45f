package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

func runPlan(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "plan", "[flags] MODEL", `
Searches for the best way to run MODEL with llama-server on this machine
(or --machine): how many slots, how much context each, how many layers on
the GPU, and which KV cache type, leaving --fit-target free in every memory
domain. It prints the choice, why, and the runner-up; --print-args prints
only the flags, for

  llama-server -m MODEL $(headroom plan MODEL --print-args)

Every candidate is accounted buffer by buffer, as 'headroom fit' does.
What you set with -c, -ngl, -ctk or -ctv is kept as given and only
checked, as llama.cpp's --fit keeps a user's -ngl; the rest is searched.
GPU memory a desktop session holds (compositor, browser; see headroom hw)
is not counted as free; the plan says what running headless would allow,
and --headless plans for that.
A machine file joined with 'headroom hw --rpc' adds the GPUs of hosts
running rpc-server: layers are split over them and this machine, each
host's memory checked on its own, and the flags carry --rpc and -ts.
A mixture of experts that does not fit whole is placed dense-first, as
llama.cpp's fit places it: every layer's attention and dense weights on
the GPUs, the routed experts of the fewest leading layers in system memory
(--n-cpu-moe N). On several GPUs where llama.cpp's default split (by free
memory) falls short, layers are filled back to front and pinned with -ts.
A projector (--mmproj) and a draft model (-md) are counted in every
candidate (the projector's compute buffer is a rough estimate) and their
flags are part of the plan's.
Tensor overrides (-ot) are kept as given in every candidate and only
checked, as llama.cpp's fit keeps them.

Examples:
  headroom plan model.gguf
  headroom plan hf:Qwen/Qwen3-8B-GGUF:Q4_K_M --machine rtx-4090 --parallel 4
  headroom plan model.gguf --goal context --json
  headroom plan model.gguf -ngl all --parallel 1
  headroom plan model.gguf --mmproj mmproj.gguf -md draft.gguf --print-args`)
	machine := fs.String("machine", "", "a preset (see headroom hw --presets) or a file from headroom hw --json; default: this machine")
	llama := llamaServerFlag(fs)
	search := searchFlags(fs)
	companions := companionFlags(fs)
	printArgs := fs.Bool("print-args", false, "print only the llama-server flags")
	asJSON := fs.Bool("json", false, "print the plan, its flags as an argv array and every candidate as JSON")
	quiet := fs.Bool("quiet", false, "print no progress on standard error")
	netGbps := fs.Float64("network-gbps", 0, "the link to the rpc-servers of a joined machine, in Gbit/s, for the network share of a token (default: 1, gigabit Ethernet, said in the output)")
	ref, err := fs.parseModel(args)
	if err != nil {
		return err
	}
	opts, err := search()
	if err != nil {
		return err
	}
	snap, err := loadMachine(ctx, *machine, *llama)
	if err != nil {
		return err
	}
	h, err := openModel(ctx, env, ref, *quiet || *printArgs)
	if err != nil {
		return err
	}
	m, err := arch.FromGGUF(h.Model)
	if err != nil {
		return err
	}
	if opts.Base.Companions, err = companions(ctx, env, *quiet || *printArgs); err != nil {
		return err
	}
	p, err := plan.Search(m, snap, opts)
	if err != nil {
		return err
	}
	if p.Chosen == nil {
		return fmt.Errorf("%s", strings.Join(p.Explain, "; "))
	}
	est := decodeEstimate(m, p.Chosen, snap)
	net, err := networkEstimate(m, p.Chosen, snap, *netGbps)
	if err != nil {
		return err
	}
	switch {
	case *printArgs:
		fmt.Fprintln(env.Stdout, strings.Join(p.Chosen.Flags, " "))
	case *asJSON:
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			*plan.Plan
			Speed   []speed.Result `json:"speed"`
			Network *speed.Network `json:"network,omitempty"`
		}{p, est, net})
	default:
		fmt.Fprintf(env.Stdout, "llama-server -m %s %s\n\n", h.Artifact.Ref, strings.Join(p.Chosen.Flags, " "))
		for _, line := range p.Explain {
			fmt.Fprintln(env.Stdout, "  "+line)
		}
		fmt.Fprintln(env.Stdout, "  "+speedLine(est))
		if net != nil {
			fmt.Fprintln(env.Stdout, "  "+networkLine(net))
		}
	}
	return nil
}

// decodeEstimate estimates generation speed for the chosen plan with an
// empty context and with one slot's context full.
func decodeEstimate(m *arch.Model, c *plan.Candidate, s *hw.Snapshot) []speed.Result {
	cpu, gpus := plan.Devices(s)
	r, err := plan.Account(m, c.Profile, cpu, gpus)
	if err != nil {
		return nil
	}
	var out []speed.Result
	for _, filled := range []int{0, c.CtxPerSlot} {
		if e, err := speed.Estimate(m, r, s, filled); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// networkEstimate is the network share of a token for a plan over
// rpc-servers; nil for a plan on this machine alone.
func networkEstimate(m *arch.Model, c *plan.Candidate, s *hw.Snapshot, gbps float64) (*speed.Network, error) {
	cpu, gpus := plan.Devices(s)
	r, err := plan.Account(m, c.Profile, cpu, gpus)
	if err != nil {
		return nil, nil
	}
	return speed.NetworkTraffic(m, r, s, gbps)
}

func networkLine(n *speed.Network) string {
	return fmt.Sprintf("network: %.1f KiB per token across hosts (%s), %.2f ms per token at %g Gbit/s (%s), on top of the decode time above; per-message latency not counted; --network-gbps sets the link",
		float64(n.BytesPerToken)/1024, strings.Join(n.Crossings, ", "), n.Ms, n.Gbps, n.GbpsSource)
}

func speedLine(est []speed.Result) string {
	if len(est) != 2 || est[0].DecodeTPS == nil || est[1].DecodeTPS == nil {
		var why []string
		for _, e := range est {
			why = append(why, e.Unknown...)
		}
		if len(why) == 0 {
			return "decode speed: not estimated"
		}
		return "decode speed: unknown (" + why[0] + ")"
	}
	line := fmt.Sprintf("decode about %.0f tokens/s per slot with an empty context, %.0f with a full one", *est[0].DecodeTPS, *est[1].DecodeTPS)
	if est[0].Calibrated {
		line += fmt.Sprintf(" (the backend's model is within %.0f%% of published llama-bench results for a 7B model)", est[0].ErrorPct)
	} else {
		line += " (uncalibrated backend: rough)"
	}
	return line
}
