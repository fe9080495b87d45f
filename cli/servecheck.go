package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/engine/workload"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/plan"
)

// servingCheck is serve --check-serving: a workload of distinct prompts
// against the started server until what it keeps past the load stops
// growing, its peak resident memory held to the plan's host domain. It
// returns the lines to print and whether the peak stayed within the plan.
// servingCheckOptions are serve's --check-serving flags.
type servingCheckOptions struct {
	on     bool
	limit  time.Duration
	tokens int
}

// servingCheckFlags registers serve's --check-serving flags and returns,
// after parsing, their options; check is whether --check was given.
func servingCheckFlags(fs *flags) func(check bool) (servingCheckOptions, error) {
	on := fs.Bool("check-serving", false, "with --check: then send distinct prompts until the prompt cache and checkpoints stop growing, and hold llama-server's peak resident memory to the plan's host figure")
	limit := fs.Duration("check-serving-time", 15*time.Minute, "how long the serving check may run")
	tokens := fs.Int("check-prompt-tokens", 2048, "the serving check's prompt length in tokens (at most a slot's context less 16)")
	return func(check bool) (servingCheckOptions, error) {
		o := servingCheckOptions{on: *on, limit: *limit, tokens: *tokens}
		switch {
		case o.on && !check:
			return o, usagef("--check-serving is a part of --check: give both")
		case o.tokens < 16:
			return o, usagef("--check-prompt-tokens %d: want 16 or more", o.tokens)
		}
		return o, nil
	}
}

func servingCheck(ctx context.Context, d *launch.Deps, run *launch.Running, o servingCheckOptions) ([]string, bool, error) {
	a := run.Ticket.Assessment
	if a == nil || a.Resolved == nil {
		return nil, false, fmt.Errorf("serving check: the load has no assessment to compare with")
	}
	host := hostDomain(a)
	if host == nil {
		return nil, false, fmt.Errorf("serving check: the plan charges no domain the CPU draws from")
	}
	vocab, err := vocabSize(ctx, run.Server.URL())
	if err != nil {
		return nil, false, err
	}
	c := a.Resolved
	slots := max(c.NSeq, 1)
	// Conversations of three turns, one per slot at a time: each turn
	// adds checkpoints to its slot, and each new conversation sends the
	// last one's state to the prompt cache. Turns long enough that each
	// leaves a state worth keeping, a conversation short enough to leave
	// room in its slot for the answer's token.
	const turns = 3
	w := workload.Workload{Tokens: max(min((c.NCtxSeq-16)/turns, o.tokens), 16), Turns: turns, MinPrompts: 2 * turns * slots, MaxPrompts: 600,
		SettleAfter: 2 * turns, SettleBytes: 4 << 20, Concurrent: slots, VocabLo: vocab / 8, VocabHi: vocab / 2, Seed: 1}
	if proof := engine.Proof(run.Flags); proof != "completion" {
		// Distinct inputs of a whole micro-batch (an encoder's input must
		// fit one): each grows the output buffer to a batch of outputs,
		// and each new task sends the idle slots' states to the prompt
		// cache.
		w.Embed, w.Turns = true, 1
		w.Tokens = max(min(c.NUBatch, c.NCtxSeq, o.tokens), 16)
		w.MinPrompts, w.SettleAfter = 2*slots, 2
	}
	w.Progress = func(n int, rss int64) {
		say(d, "checking", fmt.Sprintf("serving check: %d prompts of %d tokens, peak resident memory %.0f MiB", n, w.Tokens, float64(rss)/(1<<20)))
	}
	wctx, cancel := context.WithTimeout(ctx, o.limit)
	defer cancel()
	r, err := w.Drive(wctx, run.Server.URL(), run.Server.PID())
	if r == nil {
		return nil, false, fmt.Errorf("serving check: %w", err)
	}
	lines := []string{fmt.Sprintf("serving check: %d prompts of %d tokens, %d at a time; llama-server's resident memory %.0f MiB at load, %.0f MiB at its peak",
		r.Prompts, w.Tokens, slots, mibOf(r.LoadRSS), mibOf(r.PeakRSS))}
	if err != nil {
		lines = append(lines, fmt.Sprintf("  the workload stopped before it settled: %v", err))
	}
	ok := r.PeakRSS <= host.Required
	verdict := "within"
	if !ok {
		verdict = "OVER"
	}
	lines = append(lines, fmt.Sprintf("  the plan's %s: %.0f MiB with %.0f MiB of it past the load (%s): %s",
		host.ID, mibOf(host.Required), mibOf(host.Serving), servingRows(a.Serving), verdict))
	return lines, ok, nil
}

// hostDomain is the domain the CPU's memory belongs to: system RAM, or a
// unified pool.
func hostDomain(a *plan.Assessment) *hw.DomainUse {
	for i, d := range a.Domains {
		if d.Kind == hw.KindSystem || d.Kind == hw.KindUnified || slices.Contains(d.Views, "CPU") {
			return &a.Domains[i]
		}
	}
	return nil
}

func servingRows(bufs []plan.Buffer) string {
	s := ""
	for i, b := range bufs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %.0f MiB", b.Kind, mibOf(b.Bytes))
	}
	return s
}

func mibOf(n int64) float64 { return float64(n) / (1 << 20) }

// vocabSize asks llama-server how many tokens its model has (/v1/models'
// meta.n_vocab), to draw prompt tokens from.
func vocabSize(ctx context.Context, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("serving check: asking llama-server for its vocabulary: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			Meta struct {
				NVocab int `json:"n_vocab"`
			} `json:"meta"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return 0, fmt.Errorf("serving check: llama-server's /v1/models: %w", err)
	}
	if len(body.Data) == 0 || body.Data[0].Meta.NVocab < 64 {
		return 0, fmt.Errorf("serving check: llama-server's /v1/models names no vocabulary size")
	}
	return body.Data[0].Meta.NVocab, nil
}
