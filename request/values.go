package request

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/plan"
)

// GPULayers is -ngl's value: a number, auto or all.
type GPULayers struct{ N int }

// GPULayersAll is -ngl all, every layer: a value of the flag's own, which
// each command maps onto the plan's (auto for a check, 999 for a search).
const GPULayersAll = -2

func (g *GPULayers) String() string {
	switch g.N {
	case plan.GPULayersAuto:
		return "auto"
	case GPULayersAll:
		return "all"
	}
	return strconv.Itoa(g.N)
}

// Set reads a number of layers, auto or all.
func (g *GPULayers) Set(s string) error {
	switch s {
	case "auto":
		g.N = plan.GPULayersAuto
	case "all":
		g.N = GPULayersAll
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("want a number of layers, auto or all, not %q", s)
		}
		g.N = n
	}
	return nil
}

// floats is -ts: comma-separated proportions.
type floats []float64

func (f *floats) String() string { return fmt.Sprint([]float64(*f)) }

func (f *floats) Set(s string) error {
	split, err := plan.ParseTensorSplit(s)
	*f = split
	return err
}

// overrides collects -ot values, which may be given more than once.
type overrides []plan.Override

func (o *overrides) String() string { return "" }

func (o *overrides) Set(s string) error {
	parsed, err := plan.ParseOverrides(s)
	*o = append(*o, parsed...)
	return err
}

// fitOff is llama-server's --fit, which headroom's flags always turn off:
// with it on llama.cpp rewrites -c and -ngl at load, and the verdict would
// be for a placement that never runs.
type fitOff struct{}

func (fitOff) String() string { return "" }
func (fitOff) Set(v string) error {
	switch strings.ToLower(v) {
	case "off", "false", "0", "disabled":
		return nil
	}
	return fmt.Errorf("--fit %s: only --fit off is modeled: llama.cpp's own fit rewrites -c and -ngl at load, so a verdict for these flags would be for a placement that never runs (headroom plan searches instead)", v)
}

// loadMode is -lm, --load-mode: how the weights are loaded.
type loadMode struct{ mode *string }

func (l loadMode) String() string {
	if l.mode == nil {
		return ""
	}
	return *l.mode
}

func (l loadMode) Set(s string) error {
	switch s {
	case "auto", "none", "mmap", "mlock", "mmap+mlock":
		*l.mode = s
		return nil
	case "dio":
		return fmt.Errorf("dio loads with direct I/O into buffers, which headroom does not account yet: want auto, none, mmap, mlock or mmap+mlock")
	}
	return fmt.Errorf("want auto, none, mmap, mlock or mmap+mlock, not %q", s)
}
