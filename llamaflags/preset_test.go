package llamaflags

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParsePresets(t *testing.T) {
	src := "; written by hand\r\nversion = 1\n\n[*]\nc = 8192 ; every model\n\n  [ qwen3-8b/Q4_K_M ]  # a catalog variant\nnp=2\nctk = q8_0#comment\nhf-repo = unsloth/Qwen3-8B-GGUF:Q4_K_M\n[local]\nmodel = /models/a b.gguf\nno-mmap = true\n"
	p, err := ParsePresets("x.ini", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p.Global == nil || len(p.Global.Keys) != 1 || p.Global.Keys[0] != (PresetKey{"c", "8192", 5}) {
		t.Errorf("global %+v", p.Global)
	}
	if len(p.Models) != 2 || p.Models[0].Name != "qwen3-8b/Q4_K_M" || p.Models[0].Line != 7 || p.Models[1].Name != "local" {
		t.Fatalf("models %+v", p.Models)
	}
	want := []PresetKey{{"np", "2", 8}, {"ctk", "q8_0", 9}, {"hf-repo", "unsloth/Qwen3-8B-GGUF:Q4_K_M", 10}}
	if !slices.Equal(p.Models[0].Keys, want) {
		t.Errorf("keys %+v, want %+v", p.Models[0].Keys, want)
	}
	if kv, ok := p.Models[1].Get("m", "model"); !ok || kv.Value != "/models/a b.gguf" {
		t.Errorf("model path %+v %v", kv, ok)
	}
}

func TestParsePresetsErrors(t *testing.T) {
	for _, tt := range []struct{ src, says string }{
		{"c = 1\n[a]\n", ":1: c = 1 comes before any [section]"},
		{"[a]\nc = 1\n[b]\n[a]\n", ":4: section [a] given again (first at line 1)"},
		{"[a]\nc = 1\nc = 2\n", ":3: c given again in [a] (first at line 2)"},
		{"[a\n", ":1: a section header without its closing ]"},
		{"[a] x\n", ":1: text after the section header"},
		{"[]\n", ":1: an empty section name"},
		{"[a]\n= 3\n", ":2: want a [section], a key = value line or a comment"},
		{"[a]\nc 3\n", ":2: key c is not followed by ="},
		{"[a]\n9c = 3\n", ":2: want a [section]"},
	} {
		_, err := ParsePresets("f.ini", []byte(tt.src))
		var pe *PresetError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "f.ini"+tt.says) {
			t.Errorf("%q: %v, want %q", tt.src, err, tt.says)
		}
	}
	if _, err := ParsePresets("big.ini", make([]byte, maxPresetsFile+1)); err == nil {
		t.Error("a file over the bound was read")
	}
}

func TestPresetWords(t *testing.T) {
	tab, err := For(Builds()[len(Builds())-1])
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		key, value string
		want       []string
		says       string
	}{
		{"c", "8192", []string{"--ctx-size", "8192"}, ""},
		{"ctx-size", "8192", []string{"--ctx-size", "8192"}, ""},
		{"LLAMA_ARG_CTX_SIZE", "4096", []string{"--ctx-size", "4096"}, ""},
		{"jinja", "true", []string{"--jinja"}, ""},
		{"jinja", "0", []string{"--no-jinja"}, ""},
		{"no-kv-offload", "true", []string{"-nkvo"}, ""},
		{"nkvo", "true", []string{"-nkvo"}, ""},
		{"nkvo", "false", []string{"-kvo"}, ""},
		{"kv-offload", "off", []string{"-nkvo"}, ""},
		{"no-warmup", "false", []string{"--warmup"}, ""},
		{"no-host", "true", []string{"--no-host"}, ""},
		{"no-host", "false", nil, ""},
		{"jinja", "yes", nil, "want true or false"},
		{"c", "", nil, "has no value"},
	} {
		got, e, err := tab.PresetWords(PresetKey{Key: tt.key, Value: tt.value})
		switch {
		case e == nil:
			t.Errorf("%s: no entry", tt.key)
		case tt.says != "":
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("%s = %s: %v, want %q", tt.key, tt.value, err, tt.says)
			}
		case err != nil || !slices.Equal(got, tt.want):
			t.Errorf("%s = %s: %q %v, want %q", tt.key, tt.value, got, err, tt.want)
		}
	}
	if _, e, _ := tab.PresetWords(PresetKey{Key: "pin", Value: "true"}); e != nil {
		t.Errorf("pin is no llama-server flag, got %v", e.Names)
	}
}

// TestRouterPresetReads holds the presets the CLI writes (plan
// --router-preset) to this reader.
func TestRouterPresetReads(t *testing.T) {
	b, err := os.ReadFile("../cli/testdata/router-preset.ini")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePresets("router-preset.ini", b)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Models) != 3 {
		t.Errorf("%d models, want 3", len(p.Models))
	}
}

func FuzzParsePresets(f *testing.F) {
	f.Add([]byte("version = 1\n[*]\nc = 8192\n[a]\nnp = 2 ; x\n"))
	f.Add([]byte("[a\n"))
	f.Add([]byte("\r[b]\r\nk=v#c\r"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePresets("fuzz.ini", data)
		if err != nil {
			var pe *PresetError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		names := map[string]bool{}
		for _, s := range p.Models {
			if s.Name == "" || s.Name == "*" || names[s.Name] {
				t.Fatalf("section %q read twice or empty", s.Name)
			}
			names[s.Name] = true
			for _, kv := range s.Keys {
				if kv.Key == "" || kv.Line < s.Line || strings.ContainsAny(kv.Value, ";#\n") {
					t.Fatalf("key %+v in section at %d", kv, s.Line)
				}
			}
		}
	})
}
