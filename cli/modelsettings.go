package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/llamaflags"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/server"
)

// modelSettings are serve-api's models and how each is run: the
// --models-dir files and --pin names, with a presets file's settings per
// model on top (--models-preset, llama-server's router INI).
type modelSettings struct {
	env     Env
	args    []string // serve-api's command line, which each model's flags follow
	presets string   // the file; "" for none
	pins    names
	idle    time.Duration
	// rules are the build's the plans follow; nil is the newest
	// measured build's, as plan.Profile.Rules takes it.
	rules *builds.Rules

	mu    sync.Mutex
	stamp string // the file's size and time when last read
	// refs are what each served name loads (a presets file's model key,
	// a directory's file), for the API's fit and plan of that name.
	refs map[string]string
}

// refOf is what a served name loads; false for a name no settings give.
func (s *modelSettings) refOf(name string) (string, bool) {
	if s == nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ref, ok := s.refs[name]
	return ref, ok
}

// keep records the served models' references.
func (s *modelSettings) keep(models []server.ServedModel) {
	refs := map[string]string{}
	for _, m := range models {
		refs[m.Name] = m.Ref
		for _, a := range m.Aliases {
			refs[a] = m.Ref
		}
	}
	s.mu.Lock()
	s.refs = refs
	s.mu.Unlock()
}

// presetOnly are the keys of a presets file that are no llama-server
// flag: headroom's per-model settings (pin, idle-timeout) and
// llama-server's own preset-only keys (load-on-startup, stop-timeout).
var presetOnly = []string{"pin", "idle-timeout", "load-on-startup", "stop-timeout"}

// presetSearch are serve-api's search flags a model's section may set.
var presetSearch = []string{"goal", "min-ctx", "fit-target", "no-q8"}

// models are the served models: the directory's and the pins, and the
// presets file's, which win for a name both give.
func (s *modelSettings) models(rt *apiRuntime) ([]server.ServedModel, error) {
	base, err := servedModels(rt.dir, s.pins, s.idle, rt.checkRef)
	if err != nil {
		return nil, err
	}
	for i := range base {
		base[i].Source = "--models-dir"
		if _, ok := rt.dir[base[i].Name]; !ok {
			base[i].Source = "--pin"
		}
	}
	if s.presets == "" {
		s.keep(base)
		return base, nil
	}
	info, err := os.Stat(s.presets)
	if err != nil {
		return nil, fmt.Errorf("--models-preset: %w", err)
	}
	data, err := os.ReadFile(s.presets)
	if err != nil {
		return nil, fmt.Errorf("--models-preset: %w", err)
	}
	p, err := llamaflags.ParsePresets(s.presets, data)
	if err != nil {
		return nil, err
	}
	named, err := s.fromPresets(rt, p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.stamp = stampOf(info)
	s.mu.Unlock()
	out := named
	for _, m := range base {
		if !slices.ContainsFunc(named, func(n server.ServedModel) bool { return n.Name == m.Name }) {
			out = append(out, m)
		}
	}
	if err := uniqueNames(out); err != nil {
		return nil, err
	}
	s.keep(out)
	return out, nil
}

// uniqueNames refuses an alias that is already another model's name or
// alias: a request naming it would reach either.
func uniqueNames(models []server.ServedModel) error {
	owner := map[string]string{}
	for _, m := range models {
		owner[m.Name] = m.Name
	}
	for _, m := range models {
		for _, a := range m.Aliases {
			if o, ok := owner[a]; ok && o != m.Name {
				return fmt.Errorf("%s: alias %s of [%s] already names %s", m.Source, a, m.Name, o)
			}
			owner[a] = m.Name
		}
	}
	return nil
}

func stampOf(info os.FileInfo) string {
	return fmt.Sprintf("%d %d", info.Size(), info.ModTime().UnixNano())
}

// fromPresets turns each section of a presets file into a served model.
func (s *modelSettings) fromPresets(rt *apiRuntime, p *llamaflags.Presets) ([]server.ServedModel, error) {
	tab, err := llamaflags.Union()
	if err != nil {
		return nil, err
	}
	var out []server.ServedModel
	for i := range p.Models {
		sec := &p.Models[i]
		m, err := s.fromSection(rt, tab, p.Global, sec)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// fromSection is one model's settings: [*]'s keys, then its own.
func (s *modelSettings) fromSection(rt *apiRuntime, tab *llamaflags.Table, global, sec *llamaflags.PresetSection) (server.ServedModel, error) {
	m := server.ServedModel{Name: sec.Name, Idle: s.idle, Pinned: slices.Contains(s.pins, sec.Name),
		Source: fmt.Sprintf("%s:%d", s.presets, sec.Line)}
	fail := func(line int, format string, args ...any) error {
		return &llamaflags.PresetError{File: s.presets, Line: line, Msg: fmt.Sprintf("[%s] ", sec.Name) + fmt.Sprintf(format, args...)}
	}
	var keys []llamaflags.PresetKey
	if global != nil {
		keys = append(keys, global.Keys...)
	}
	keys = append(keys, sec.Keys...)
	var ref, hfRepo, hfFile string
	for _, kv := range keys {
		var err error
		switch kv.Key {
		case "model", "m":
			ref = kv.Value
			if !filepath.IsAbs(ref) {
				ref = filepath.Join(filepath.Dir(s.presets), ref)
			}
			if _, err := os.Stat(ref); err != nil {
				return m, fail(kv.Line, "model = %s: %v", kv.Value, err)
			}
		case "hf-repo", "hf", "hfr":
			hfRepo = kv.Value
		case "hf-file", "hff":
			hfFile = kv.Value
		case "alias", "a":
			for _, a := range strings.Split(kv.Value, ",") {
				if a = strings.TrimSpace(a); a != "" && a != sec.Name {
					m.Aliases = append(m.Aliases, a)
				}
			}
		case "pin":
			m.Pinned, err = presetBool(kv)
		case "load-on-startup":
			m.Warm, err = presetBool(kv)
		case "idle-timeout":
			m.Idle, err = presetDuration(kv, time.Second)
		case "stop-timeout":
			m.Drain, err = presetDuration(kv, time.Second)
		default:
			var words []string
			if words, err = s.flagWords(tab, kv); err == nil {
				if _, err = s.options(append(slices.Clone(m.Flags), words...)); err == nil {
					m.Flags = append(m.Flags, words...)
				}
			}
		}
		if err != nil {
			return m, fail(kv.Line, "%v", err)
		}
	}
	switch {
	case ref != "" && hfRepo != "":
		return m, fail(sec.Line, "gives both model and hf-repo; give one")
	case hfRepo != "" && hfFile != "":
		repo, _, _ := strings.Cut(hfRepo, ":")
		ref = "hf:" + repo + "/" + hfFile
	case hfRepo != "":
		ref = "hf:" + hfRepo
	case ref == "" && rt.dir[sec.Name] != "":
		ref = rt.dir[sec.Name]
	case ref == "":
		// The section names the model: a catalog variant, an hf:
		// reference or a store file, as a request may.
		if err := rt.checkRef(sec.Name); err != nil {
			return m, fail(sec.Line, "names no model (no model or hf-repo key, and %v)", err)
		}
		ref = sec.Name
	}
	m.Ref = ref
	opts, err := s.options(m.Flags)
	if err != nil {
		return m, fail(sec.Line, "%v", err)
	}
	m.Search = &opts
	return m, nil
}

// flagWords are a key's words on serve-api's command line: a llama-server
// flag's (through the codec), or one of serve-api's search flags.
func (s *modelSettings) flagWords(tab *llamaflags.Table, kv llamaflags.PresetKey) ([]string, error) {
	words, e, err := tab.PresetWords(kv)
	if e != nil || err != nil {
		return words, err
	}
	if slices.Contains(presetSearch, kv.Key) {
		return []string{"--" + kv.Key + "=" + kv.Value}, nil
	}
	return nil, fmt.Errorf("%s is no llama-server flag and no setting of headroom's (%s, alias, model, hf-repo, hf-file, %s)",
		kv.Key, strings.Join(presetOnly, ", "), strings.Join(presetSearch, ", "))
}

// options are the search options of serve-api's command line with a
// model's flags after it, as serve-api reads its own.
func (s *modelSettings) options(words []string) (o plan.SearchOptions, err error) {
	f := newServeAPIFlags(s.env)
	f.fs.SetOutput(io.Discard)
	o, err = f.parse(append(slices.Clone(s.args), words...))
	if err != nil {
		return o, err
	}
	o.Base.Rules = s.rules
	if s.rules != nil {
		f.fs.mlockLoads(&o.Base, *s.rules)
	}
	return o, nil
}

func presetBool(kv llamaflags.PresetKey) (bool, error) {
	on, ok := llamaflags.PresetBool(kv.Value)
	if !ok {
		return false, fmt.Errorf("%s = %q: want true or false", kv.Key, kv.Value)
	}
	return on, nil
}

// presetDuration reads a time as Go writes one (30m, 1h30m) or a number
// of units (llama-server's stop-timeout is in seconds).
func presetDuration(kv llamaflags.PresetKey, unit time.Duration) (time.Duration, error) {
	if n, err := strconv.Atoi(kv.Value); err == nil && n >= 0 {
		return time.Duration(n) * unit, nil
	}
	d, err := time.ParseDuration(kv.Value)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s = %q: want a time such as 30m or a number of seconds", kv.Key, kv.Value)
	}
	return d, nil
}

// settingsPoll is how often the presets file is checked for a change.
const settingsPoll = 2 * time.Second

// watch reads the presets file again on SIGHUP or when it changes, and
// gives the pool the new settings; a file that cannot be read is refused
// with its line and reason, and the old settings stay.
func (s *modelSettings) watch(ctx context.Context, rt *apiRuntime) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(settingsPoll)
	defer tick.Stop()
	for {
		asked := false
		select {
		case <-ctx.Done():
			return
		case <-hup:
			asked = true
		case <-tick.C:
		}
		if s.presets == "" {
			if asked {
				rt.pool.Note("settings", "", "SIGHUP: no --models-preset file to read again")
			}
			continue
		}
		if !asked && !s.changed() {
			continue
		}
		s.reload(rt)
	}
}

// changed reports whether the presets file differs from the one read.
func (s *modelSettings) changed() bool {
	info, err := os.Stat(s.presets)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		return s.stamp != "missing"
	}
	return stampOf(info) != s.stamp
}

func (s *modelSettings) reload(rt *apiRuntime) {
	models, err := s.models(rt)
	if err != nil {
		// Said once, not at every poll: the file as it is now, or its
		// absence, counts as read.
		stamp := "missing"
		if info, serr := os.Stat(s.presets); serr == nil {
			stamp = stampOf(info)
		}
		s.mu.Lock()
		s.stamp = stamp
		s.mu.Unlock()
		rt.pool.Note("settings", "", fmt.Sprintf("%v; the settings read before stay", err))
		return
	}
	rt.pool.Configure(models)
	rt.pool.Note("settings", "", fmt.Sprintf("read %s: %d model(s)", s.presets, len(models)))
}
