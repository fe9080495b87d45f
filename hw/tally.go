package hw

import (
	"fmt"
)

// Charge kinds: the four parts of a domain's breakdown.
const (
	ChargeModel     = "model"     // weights and other persistent components
	ChargeContext   = "context"   // KV cache and recurrent state
	ChargeCompute   = "compute"   // graph workspace
	ChargeAuxiliary = "auxiliary" // output buffer, projector, draft, anything else
	// ChargeServing is what a server holds past its load while it serves
	// (a prompt cache, context checkpoints, the process itself).
	ChargeServing = "serving"
)

// Charge is one allocation the planner expects llama.cpp to make: on a
// device view or buffer type as llama.cpp names it (CUDA0, CPU_Mapped,
// CUDA_Host, MTL0), of one kind, of Bytes bytes. ggml splits a buffer
// larger than a device allows into several allocations, so what a device's
// largest binding limits is the largest single tensor in the charge,
// Largest (0 when unknown or already kept within the limit).
type Charge struct {
	Device  string `json:"device"`
	Kind    string `json:"kind"`
	Bytes   int64  `json:"bytes"`
	Largest int64  `json:"largest_bytes,omitempty"`
}

// DomainUse is one domain's breakdown, in the shape of the domains entries
// of 'headroom fit --json'.
type DomainUse struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	Views     []string `json:"views"`
	Model     int64    `json:"model"`
	Context   int64    `json:"context"`
	Compute   int64    `json:"compute"`
	Auxiliary int64    `json:"auxiliary"`
	// Serving is what the server grows to past its load (0 for a load
	// alone); Required counts it.
	Serving   int64 `json:"serving"`
	Required  int64 `json:"required"`
	Available int64 `json:"available"`
	Margin    int64 `json:"margin"` // Available - Required; negative when it does not fit
}

// Breach is a device-local limit that a charge breaks even when its domain
// has room.
type Breach struct {
	Device string `json:"device"`
	// Limit is "max_alloc" (a charge holds a tensor larger than the
	// device's largest binding) or "device_total" (the device's charges add up to
	// more than the backend reports as its total, e.g. Metal's working set).
	Limit   string `json:"limit"`
	Bytes   int64  `json:"bytes"`
	Allowed int64  `json:"allowed"`
}

// Tally is the per-domain aggregation of a plan's charges.
type Tally struct {
	Domains  []DomainUse `json:"domains"`
	Breaches []Breach    `json:"breaches,omitempty"`
	// Fits is true when every domain has a margin of zero or more and no
	// device-local limit is broken.
	Fits bool `json:"fits"`
	// Limiting is the domain that decides the verdict: the one with the
	// largest deficit, else the domain of the first breach, else (when it
	// fits) the one with the least margin. Empty when nothing was charged.
	Limiting string `json:"limiting,omitempty"`
}

// Tally aggregates charges per physical domain through the bindings: each
// charge's device is resolved to its domain (see DomainOf), so CPU and MTL0
// charges on a Mac land in one unified domain, and CPU, CUDA0 and CUDA1
// charges on a two-GPU box in three. Available is each domain's usable share,
// or less where less was free (Domain.Available). Every domain is listed,
// charged or not, in snapshot order. An unknown device, an unknown kind or a
// negative size is an error.
func (s *Snapshot) Tally(charges []Charge) (*Tally, error) {
	t := &Tally{Domains: make([]DomainUse, len(s.Domains))}
	index := map[string]int{}
	for i := range s.Domains {
		d := &s.Domains[i]
		index[d.ID] = i
		t.Domains[i] = DomainUse{ID: d.ID, Kind: d.Kind, Views: s.Views(d.ID), Available: d.Available()}
		if t.Domains[i].Views == nil {
			t.Domains[i].Views = []string{}
		}
	}
	perDevice := map[string]int64{}
	var order []string
	for i, c := range charges {
		if c.Bytes < 0 {
			return nil, fmt.Errorf("hw: charges[%d] (%s %s): bytes is %d, expected zero or more", i, c.Device, c.Kind, c.Bytes)
		}
		dev, err := s.ResolveDevice(c.Device)
		if err != nil {
			return nil, fmt.Errorf("charges[%d]: %w", i, err)
		}
		j, ok := index[dev.Domain]
		if !ok {
			return nil, fmt.Errorf("hw: charges[%d]: device %s is bound to domain %q, which the snapshot does not have", i, dev.Name, dev.Domain)
		}
		u := &t.Domains[j]
		switch c.Kind {
		case ChargeModel:
			u.Model += c.Bytes
		case ChargeContext:
			u.Context += c.Bytes
		case ChargeCompute:
			u.Compute += c.Bytes
		case ChargeAuxiliary:
			u.Auxiliary += c.Bytes
		case ChargeServing:
			u.Serving += c.Bytes
		default:
			return nil, fmt.Errorf("hw: charges[%d] (%s): kind is %q, expected %s, %s, %s, %s or %s",
				i, c.Device, c.Kind, ChargeModel, ChargeContext, ChargeCompute, ChargeAuxiliary, ChargeServing)
		}
		if dev.MaxAlloc > 0 && c.Largest > dev.MaxAlloc {
			t.Breaches = append(t.Breaches, Breach{Device: dev.Name, Limit: "max_alloc", Bytes: c.Largest, Allowed: dev.MaxAlloc})
		}
		if _, seen := perDevice[dev.Name]; !seen {
			order = append(order, dev.Name)
		}
		perDevice[dev.Name] += c.Bytes
	}
	for _, name := range order {
		dev := s.Device(name)
		if dev.Total > 0 && perDevice[name] > dev.Total {
			t.Breaches = append(t.Breaches, Breach{Device: name, Limit: "device_total", Bytes: perDevice[name], Allowed: dev.Total})
		}
	}
	worst, tightest := -1, -1
	for i := range t.Domains {
		u := &t.Domains[i]
		u.Required = u.Model + u.Context + u.Compute + u.Auxiliary + u.Serving
		u.Margin = u.Available - u.Required
		if u.Margin < 0 && (worst < 0 || u.Margin < t.Domains[worst].Margin) {
			worst = i
		}
		if u.Required > 0 && (tightest < 0 || u.Margin < t.Domains[tightest].Margin) {
			tightest = i
		}
	}
	t.Fits = worst < 0 && len(t.Breaches) == 0
	switch {
	case worst >= 0:
		t.Limiting = t.Domains[worst].ID
	case len(t.Breaches) > 0:
		t.Limiting = s.Device(t.Breaches[0].Device).Domain
	case tightest >= 0:
		t.Limiting = t.Domains[tightest].ID
	}
	return t, nil
}
