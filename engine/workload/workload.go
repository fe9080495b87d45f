// Package workload drives a running llama-server with a serving workload
// and measures what it grows to: the memory the prompt cache, the context
// checkpoints and the process take past the load.
package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Workload drives a running llama-server with distinct prompts of token
// ids (which work with any vocabulary, synth's too) until what it keeps
// past the load stops growing, sampling its resident memory all along:
// the prompt cache fills with the states of prompts the slots leave, and
// each slot makes its context checkpoints.
type Workload struct {
	// Tokens is each prompt's length.
	Tokens int `json:"tokens"`
	// MinPrompts and MaxPrompts bound the prompts sent: at least
	// MinPrompts, then until the peak has not grown by more than
	// SettleBytes over the last SettleAfter rounds, at most MaxPrompts.
	MinPrompts  int   `json:"min_prompts"`
	MaxPrompts  int   `json:"max_prompts"`
	SettleAfter int   `json:"settle_after"`
	SettleBytes int64 `json:"settle_bytes"`
	// Concurrent is how many prompts are in flight at once (one per slot
	// keeps every slot busy).
	Concurrent int `json:"concurrent"`
	// Turns is how many turns each conversation has: each turn's prompt
	// is the last one and Tokens more. 0 or 1: every prompt is new.
	Turns int `json:"turns,omitempty"`
	// VocabLo and VocabHi bound the token ids drawn, clear of the
	// special tokens at either end of a vocabulary.
	VocabLo, VocabHi int `json:"-"`
	// Seed makes the prompts repeatable.
	Seed uint64 `json:"seed"`
	// Embed sends each prompt to /v1/embeddings instead of /completion:
	// an embedding or reranking server (--embedding, --rerank), whose
	// output buffer grows to a batch of outputs and which keeps no
	// prompts.
	Embed bool `json:"embed,omitempty"`
	// Progress, if set, hears of each round answered.
	Progress func(n int, rss int64) `json:"-"`
}

// ServingRun is what a workload measured.
type ServingRun struct {
	// LoadRSS is the server's resident memory once it answers /health,
	// before any prompt.
	LoadRSS int64 `json:"load_rss"`
	// PeakRSS is the most resident memory sampled (every 20 ms).
	PeakRSS int64 `json:"peak_rss"`
	// PeakAnon is the most anonymous resident memory sampled: RSS less
	// the file's mapped pages.
	PeakAnon int64 `json:"peak_anon"`
	// FinalRSS is the resident memory after the last prompt.
	FinalRSS int64 `json:"final_rss"`
	// Prompts is how many prompts were answered.
	Prompts int `json:"prompts"`
	// ReadySeconds is how long the server took from its start to answer
	// /health, where the caller started it.
	ReadySeconds float64 `json:"ready_seconds"`
	// Log is the server's log, where the caller kept it.
	Log string `json:"-"`
}

// Drive runs the workload against the llama-server at base (its URL),
// process pid.
func (w Workload) Drive(ctx context.Context, base string, pid int) (*ServingRun, error) {
	if w.Tokens <= 0 || w.MaxPrompts <= 0 || w.VocabHi <= w.VocabLo {
		return nil, fmt.Errorf("workload: a workload needs tokens, prompts and a vocabulary range, got %d tokens, %d prompts, ids %d..%d", w.Tokens, w.MaxPrompts, w.VocabLo, w.VocabHi)
	}
	run := &ServingRun{}
	rss, _, err := ReadRSS(pid)
	if err != nil {
		return nil, err
	}
	run.LoadRSS = rss
	s := startSampler(pid)
	err = w.drive(ctx, base, run, s)
	run.PeakRSS, run.PeakAnon = s.stop()
	if err != nil {
		return run, err
	}
	run.FinalRSS, _, _ = ReadRSS(pid)
	return run, nil
}

// drive sends the prompts, Concurrent at a time, until the peak settles.
func (w Workload) drive(ctx context.Context, base string, run *ServingRun, s *sampler) error {
	rng := rand.New(rand.NewPCG(w.Seed, 0x5e7))
	conc := max(w.Concurrent, 1)
	var history []int64
	// Each of the concurrent conversations grows by Tokens a turn, for
	// Turns turns (one: every prompt distinct), then starts again: a
	// slot finds its conversation again and keeps adding checkpoints,
	// and a conversation started anew sends the old one's state to the
	// prompt cache.
	turns := max(w.Turns, 1)
	prompts := make([][]int, conc)
	for round := 0; run.Prompts < w.MaxPrompts; round++ {
		for i := range prompts {
			if round%turns == 0 {
				prompts[i] = nil
			}
			for range w.Tokens {
				prompts[i] = append(prompts[i], w.VocabLo+rng.IntN(w.VocabHi-w.VocabLo))
			}
		}
		errs := make([]error, conc)
		var wg sync.WaitGroup
		for i := range prompts {
			wg.Go(func() {
				if w.Embed {
					errs[i] = embed(ctx, base, prompts[i])
				} else {
					errs[i] = complete(ctx, base, prompts[i])
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		run.Prompts += conc
		peak := s.peak()
		if w.Progress != nil {
			w.Progress(run.Prompts, peak)
		}
		history = append(history, peak)
		if n := len(history); run.Prompts >= w.MinPrompts && w.SettleAfter > 0 && n > w.SettleAfter &&
			peak-history[n-1-w.SettleAfter] <= w.SettleBytes {
			break
		}
	}
	return nil
}

// complete asks for one token after prompt, keeping the prompt in the
// cache as a client does by default.
func complete(ctx context.Context, base string, prompt []int) error {
	return post(ctx, base, "/completion", map[string]any{"prompt": prompt, "n_predict": 1, "cache_prompt": true, "temperature": 0})
}

// embed asks for the embedding of prompt.
func embed(ctx context.Context, base string, prompt []int) error {
	return post(ctx, base, "/v1/embeddings", map[string]any{"input": prompt})
}

// post sends one request and reads its answer.
func post(ctx context.Context, base, path string, request map[string]any) error {
	body, _ := json.Marshal(request)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("workload: %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("workload: %s answered %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	// An embedding answer is large; read it to the end so the connection
	// is reused.
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// ReadRSS reads a process's resident memory, in all and anonymous, from
// /proc/PID/status (VmRSS, RssAnon).
func ReadRSS(pid int) (rss, anon int64, err error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = n << 10
		case "RssAnon":
			anon = n << 10
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("workload: no VmRSS in /proc/%d/status", pid)
	}
	return rss, anon, sc.Err()
}

// sampler reads a process's resident memory every 20 ms and keeps the
// most seen.
type sampler struct {
	mu         sync.Mutex
	rss, anon  int64
	done, quit chan struct{}
}

func startSampler(pid int) *sampler {
	s := &sampler{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, anon, err := ReadRSS(pid); err == nil {
				s.mu.Lock()
				s.rss, s.anon = max(s.rss, rss), max(s.anon, anon)
				s.mu.Unlock()
			}
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) peak() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss
}

func (s *sampler) stop() (rss, anon int64) {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss, s.anon
}
