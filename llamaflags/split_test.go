package llamaflags

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// ownFlags stands for a command's flag set: -c, -np, -fa and --json.
func ownFlags(name string) (bool, bool) {
	switch name {
	case "c", "ctx-size", "np", "parallel", "fa", "flash-attn", "program":
		return true, false
	case "json", "no-mmap":
		return true, true
	}
	return false, false
}

func TestSplit(t *testing.T) {
	tb, err := Load("80fb11a")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		args    string
		own     string
		pass    string
		said    string
		program Program
		err     string
	}{
		{name: "own and pass-through", args: "m.gguf -c 4096 --api-key secret123 --jinja -t 1 --json",
			own: "m.gguf -c 4096 --json", pass: "--api-key secret123 --jinja -t 1", said: "--api-key *** --jinja -t 1"},
		{name: "= form", args: "m.gguf --port=8081 --ctx-size=8192", own: "m.gguf --ctx-size=8192", pass: "--port 8081"},
		{name: "one-dash long name written as llama.cpp spells it", args: "m.gguf -chat-template-kwargs {}", own: "m.gguf", pass: "--chat-template-kwargs {}"},
		{name: "negative value", args: "m.gguf --seed -1 -c 512", own: "m.gguf -c 512", pass: "--seed -1"},
		{name: "a value that looks like a flag is the flag's", args: "-fa -hf X", own: "-fa -hf X"},
		{name: "pasted llama-server", args: "-- llama-server -m /m/q.gguf -c 2048 --host 0.0.0.0 --no-context-shift",
			own: "/m/q.gguf -c 2048", pass: "--host 0.0.0.0 --no-context-shift", program: Server},
		{name: "pasted path", args: "-- ./build/bin/llama-server -hf ggml-org/gemma-3-1b-it-GGUF -hff gemma-3-1b-it-Q4_K_M.gguf",
			own: "hf:ggml-org/gemma-3-1b-it-GGUF/gemma-3-1b-it-Q4_K_M.gguf", program: Server},
		{name: "pasted llama-cli", args: "-- llama-cli -m q.gguf -p hello -c 512", own: "q.gguf -c 512", pass: "-p hello", program: CLI},
		{name: "one quoted word", args: "'llama-server -m \"my model.gguf\" -c 1024 --port 9000'", own: "my model.gguf -c 1024", pass: "--port 9000", program: Server},
		{name: "hf with quant", args: "-hf unsloth/Qwen3-8B-GGUF:Q4_K_M", own: "hf:unsloth/Qwen3-8B-GGUF:Q4_K_M"},
		{name: "two values", args: "m.gguf --control-vector-layer-range 1 2", err: "--control-vector-layer-range: adds weights"},
		{name: "missing value", args: "m.gguf --port", err: "--port takes a value (PORT)"},
		{name: "refused", args: "m.gguf -sm row", err: "-sm: how layers are split"},
		{name: "router", args: "-- llama-server --models-dir ./m", err: "--models-dir: starts llama-server's router"},
		{name: "router without a model", args: "-- llama-server --port 9000", err: "llama-server with no model (-m, -hf): starts"},
		{name: "environment", args: "-- CUDA_VISIBLE_DEVICES=1 llama-server -m q.gguf", err: "CUDA_VISIBLE_DEVICES=1 sets llama-server's environment"},
		{name: "modeled, not this command's", args: "m.gguf -ctk q8_0", err: "-ctk is llama.cpp's --cache-type-k, which headroom counts, but this command does not take it"},
		{name: "hff alone", args: "-hff x.gguf", err: "-hff x.gguf names a file of the -hf repository"},
		{name: "unknown stays for the flag set", args: "m.gguf --paralel 2", own: "m.gguf --paralel 2"},
		{name: "after --", args: "m.gguf -- --port", own: "m.gguf -- --port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args, err := ShellWords(c.args)
			if err != nil {
				t.Fatal(err)
			}
			l, err := tb.Split(args, ownFlags)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(l.Own, " "); got != c.own {
				t.Errorf("own %q, want %q", got, c.own)
			}
			if got := strings.Join(l.PassWords(), " "); got != c.pass {
				t.Errorf("passed %q, want %q", got, c.pass)
			}
			if c.said != "" && l.PassSaid() != c.said {
				t.Errorf("said %q, want %q", l.PassSaid(), c.said)
			}
			if l.Program != c.program {
				t.Errorf("program %q, want %q", l.Program, c.program)
			}
		})
	}
}

func TestSplitRefusedIsTyped(t *testing.T) {
	tb, err := Load("80fb11a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tb.Split([]string{"m.gguf", "--lora", "a.gguf"}, ownFlags)
	var r ErrRefused
	if !errors.As(err, &r) || r.Typed != "--lora" {
		t.Fatalf("error %v, want ErrRefused for --lora", err)
	}
}

func TestNotFor(t *testing.T) {
	tb, err := Load("80fb11a")
	if err != nil {
		t.Fatal(err)
	}
	l, err := tb.Split([]string{"m.gguf", "-p", "hi", "--jinja"}, ownFlags)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.NotFor(Server); err == nil || !strings.Contains(err.Error(), "-p is not a flag of llama-server (only llama-cli, llama-completion and llama-fit-params take it)") {
		t.Errorf("NotFor(server) = %v", err)
	}
	if err := l.NotFor(CLI); err != nil {
		t.Errorf("NotFor(cli) = %v, want nil", err)
	}
}

func TestShellWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  bool
	}{
		{in: `llama-server -m a.gguf`, want: []string{"llama-server", "-m", "a.gguf"}},
		{in: `a  'b c'  "d \" e" f\ g`, want: []string{"a", "b c", `d " e`, "f g"}},
		{in: `--chat-template-kwargs '{"enable_thinking": false}'`, want: []string{"--chat-template-kwargs", `{"enable_thinking": false}`}},
		{in: "a \\\n b", want: []string{"a", "b"}},
		{in: `''`, want: []string{""}},
		{in: `a 'b`, err: true},
	} {
		got, err := ShellWords(c.in)
		if (err != nil) != c.err || !c.err && !slices.Equal(got, c.want) {
			t.Errorf("ShellWords(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestParseHelpErrors(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{"", "lists no flags"},
		{"-c, --ctx-size N   x\n-c N      again\n", "-c is listed again"},
		{"-x, foo N\n", "want a flag's spelling"},
	} {
		if _, err := ParseHelp(c.in); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("ParseHelp(%q) = %v, want %q", c.in, err, c.err)
		}
	}
}

func FuzzParseHelp(f *testing.F) {
	data, _ := helpFS.ReadFile("help/80fb11a/llama-fit-params.txt")
	f.Add(string(data[:2000]))
	f.Add("-ts,   --tensor-split N0,N1,N2,...      x\n")
	f.Fuzz(func(t *testing.T, s string) {
		flags, err := ParseHelp(s)
		if err != nil {
			return
		}
		for _, fl := range flags {
			if len(fl.Names) == 0 || fl.Values < 0 || fl.Values > 2 {
				t.Fatalf("flag %+v from %q", fl, s)
			}
			for _, n := range fl.Names {
				if !strings.HasPrefix(n, "-") {
					t.Fatalf("spelling %q from %q", n, s)
				}
			}
		}
	})
}

func FuzzShellWords(f *testing.F) {
	f.Add(`llama-server -m "a b.gguf" --x 'y z' \q`)
	f.Fuzz(func(t *testing.T, s string) {
		words, err := ShellWords(s)
		if err != nil {
			return
		}
		// Words quoted back and split again are the same words.
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		again, err := ShellWords(strings.Join(quoted, " "))
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("%q: words %q, quoted and split again %q (%v)", s, words, again, err)
		}
	})
}

func TestOnly(t *testing.T) {
	tb, err := Load("80fb11a")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Fields("-c 8192 -np 4 -ngl all --fit off -kvu -cram 0 --api-key k --jinja -ctxcp 3 -t 2")
	kept, left := tb.Only(FitParams, args)
	if got, want := strings.Join(kept, " "), "-c 8192 -np 4 -ngl all --fit off -t 2"; got != want {
		t.Errorf("kept %q, want %q", got, want)
	}
	if got, want := strings.Join(left, " "), "-kvu -cram 0 --api-key k --jinja -ctxcp 3"; got != want {
		t.Errorf("left %q, want %q", got, want)
	}
	if kept, left := tb.Only(Server, args); len(left) != 0 || len(kept) != len(args) {
		t.Errorf("llama-server left %q of its own flags", left)
	}
}
