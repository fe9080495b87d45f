package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/server"
	"github.com/headroom-llm/headroom/store"
)

// settingsRuntime is an apiRuntime with a store, the built-in catalog
// and a --models-dir of one file, a.gguf.
func settingsRuntime(t *testing.T) (*apiRuntime, string) {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.gguf"), []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := &apiRuntime{d: &launch.Deps{Catalog: cat}, st: st}
	if rt.dir, err = modelsDir(dir); err != nil {
		t.Fatal(err)
	}
	return rt, dir
}

func writePresets(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "models.ini")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestModelSettings(t *testing.T) {
	rt, dir := settingsRuntime(t)
	other := filepath.Join(dir, "sub", "b.bin")
	os.MkdirAll(filepath.Dir(other), 0o755)
	os.WriteFile(other, []byte("GGUF"), 0o644)
	path := writePresets(t, dir, `version = 1
[*]
c = 4096
jinja = true

[a]
np = 2
pin = true
alias = chat, helper
idle-timeout = 5m
load-on-startup = true
stop-timeout = 7

[b]
model = sub/b.bin
ctk = q8_0
fa = on
goal = speed

[qwen3-8b/Q4_K_M]
hf-repo = unsloth/Qwen3-8B-GGUF:Q4_K_M
`)
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	s := &modelSettings{env: env, args: []string{"-np", "1", "--idle-timeout", "1m"}, presets: path, idle: time.Minute}
	rt.settings = s
	models, err := s.models(rt)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]server.ServedModel{}
	for _, m := range models {
		by[m.Name] = m
	}
	a := by["a"]
	if a.Ref != rt.dir["a"] || !a.Pinned || !a.Warm || a.Idle != 5*time.Minute || a.Drain != 7*time.Second ||
		!slices.Equal(a.Aliases, []string{"chat", "helper"}) || a.Source != path+":6" {
		t.Errorf("a: %+v", a)
	}
	if a.Search == nil || a.Search.Parallel != 2 || a.Search.Fixed.Ctx != 4096 || !slices.Contains(a.Search.Base.Pass, "--jinja") {
		t.Errorf("a's search: %+v", a.Search)
	}
	if !slices.Equal(a.Flags, []string{"--ctx-size", "4096", "--jinja", "--parallel", "2"}) {
		t.Errorf("a's flags %q", a.Flags)
	}
	b := by["b"]
	if b.Ref != other || b.Pinned || b.Idle != time.Minute || b.Search == nil || b.Search.Goal != "speed" || b.Search.Parallel != 1 ||
		b.Search.Fixed.CacheK != "q8_0" || b.Search.Base.FlashAttn != "on" {
		t.Errorf("b: %+v, search %+v", b, b.Search)
	}
	if q := by["qwen3-8b/Q4_K_M"]; q.Ref != "hf:unsloth/Qwen3-8B-GGUF:Q4_K_M" {
		t.Errorf("the hf-repo model: %+v", q)
	}
	if ref, ok := s.refOf("chat"); !ok || ref != a.Ref {
		t.Errorf("the alias resolves to %q %v", ref, ok)
	}
}

func TestModelSettingsRefused(t *testing.T) {
	rt, dir := settingsRuntime(t)
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	for _, tt := range []struct{ text, says string }{
		{"[a]\nwhatever = 3\n", "models.ini:2: [a] whatever is no llama-server flag and no setting of headroom's"},
		{"[a]\npin = yes\n", `models.ini:2: [a] pin = "yes": want true or false`},
		{"[a]\nmodel = missing.gguf\n", "models.ini:2: [a] model = missing.gguf"},
		{"[a]\nsm = row\n", "models.ini:2: [a] --split-mode"},
		{"[a]\nport = 9000\n", "models.ini:2: [a] --port"},
		{"[a]\nidle-timeout = soon\n", "models.ini:2: [a] idle-timeout"},
		{"[gpt-4]\nc = 4096\n", "models.ini:1: [gpt-4] names no model"},
		{"[a]\nc = 1\nc = 2\n", "models.ini:3: c given again in [a]"},
		{"[a]\nmodel = a.gguf\nhf-repo = x/y\n", "models.ini:1: [a] gives both model and hf-repo"},
		{"[a]\nc = 1\n[b]\nmodel = a.gguf\nalias = a\n", "models.ini:3: alias a of [b] already names a"},
		{"[b]\nmodel = a.gguf\nalias = x\n[c]\nmodel = a.gguf\nalias = x\n", "models.ini:4: alias x of [c] already names b"},
	} {
		s := &modelSettings{env: env, presets: writePresets(t, dir, tt.text)}
		_, err := s.models(rt)
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%q: %v, want %q", tt.text, err, tt.says)
		}
	}
}

// TestModelSettingsReload: a changed presets file is read again and given
// to the pool (on SIGHUP, or when it changes); a bad one is refused with
// its line, and the settings read before stay.
func TestModelSettingsReload(t *testing.T) {
	rt, dir := settingsRuntime(t)
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	path := writePresets(t, dir, "[a]\nc = 4096\n")
	s := &modelSettings{env: env, presets: path}
	rt.settings = s
	models, err := s.models(rt)
	if err != nil {
		t.Fatal(err)
	}
	rt.pool = server.NewPool(server.PoolConfig{Models: models})
	defer rt.pool.Close(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go s.watch(ctx, rt)
	settled := func(want func() bool) bool {
		deadline := time.Now().Add(10 * time.Second)
		for !want() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		return want()
	}
	has := func(name string) bool {
		return slices.ContainsFunc(rt.pool.Models(), func(m server.PoolModel) bool { return m.Name == name })
	}
	flags := func(name string) []string {
		for _, m := range rt.pool.Models() {
			if m.Name == name {
				return m.Flags
			}
		}
		return nil
	}
	// A change on disk is seen by the poll.
	writePresets(t, dir, "[a]\nc = 8192\n[chat]\nmodel = a.gguf\n")
	if !settled(func() bool { return slices.Equal(flags("a"), []string{"--ctx-size", "8192"}) && has("chat") }) {
		t.Fatalf("after the change: %+v", rt.pool.Models())
	}
	// A bad file: refused with its line, the old settings kept.
	writePresets(t, dir, "[a]\nc = 8192\nbogus = 1\n")
	refused := func() bool {
		for _, e := range rt.pool.Events() {
			if e.Kind == "settings" && strings.Contains(e.Reason, "models.ini:3: [a] bogus") && strings.Contains(e.Reason, "the settings read before stay") {
				return true
			}
		}
		return false
	}
	if !settled(refused) || !has("chat") {
		t.Fatalf("the bad file: events %+v, models %+v", rt.pool.Events(), rt.pool.Models())
	}
	// Said once, not at every poll.
	time.Sleep(settingsPoll + settingsPoll/2)
	said := 0
	for _, e := range rt.pool.Events() {
		if strings.Contains(e.Reason, "bogus") {
			said++
		}
	}
	if said != 1 {
		t.Errorf("the bad file was refused %d times, want once", said)
	}
	// SIGHUP reads it again at once, even unchanged.
	writePresets(t, dir, "[a]\nc = 2048\n")
	s.mu.Lock()
	s.stamp = "" // as if the poll had not seen it yet
	s.mu.Unlock()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !settled(func() bool { return slices.Equal(flags("a"), []string{"--ctx-size", "2048"}) && !has("chat") }) {
		t.Fatalf("after SIGHUP: %+v", rt.pool.Models())
	}
}
