package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/llamaflags"
)

// llamaCppCommand is one block of testdata/llamacpp-commands.txt.
type llamaCppCommand struct {
	from   string   // where llama.cpp's documentation shows it
	expect string   // "verdict", or "refused FLAG: WORD"
	args   []string // the command as the shell splits it
}

// readLlamaCppCommands reads the blocks of the file: "#" lines carry the
// source and the expectation, the rest is one command line, which may go
// on over "\" continuations.
func readLlamaCppCommands(t *testing.T, path string) []llamaCppCommand {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []llamaCppCommand
	for _, block := range strings.Split(string(data), "\n\n") {
		var c llamaCppCommand
		var line strings.Builder
		for _, l := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(l, "# from: "):
				c.from = strings.TrimPrefix(l, "# from: ")
			case strings.HasPrefix(l, "# expect: "):
				c.expect = strings.TrimPrefix(l, "# expect: ")
			case strings.HasPrefix(l, "#"), strings.TrimSpace(l) == "":
			default:
				line.WriteString(l + "\n")
			}
		}
		if line.Len() == 0 {
			continue
		}
		if c.from == "" || c.expect == "" {
			t.Fatalf("%s: a command without its source or expectation:\n%s", path, block)
		}
		args, err := llamaflags.ShellWords(line.String())
		if err != nil {
			t.Fatalf("%s: %v:\n%s", path, err, block)
		}
		c.args = args
		out = append(out, c)
	}
	return out
}

// TestLlamaCppCommands pastes llama.cpp's own documented llama-server
// command lines (testdata/llamacpp-commands.txt) and everyday ones
// (testdata/everyday-commands.txt) into fit, plan and serve, each model
// file replaced by a synth file of the same role (model, draft,
// projector): each command answers alike. fit and plan give a verdict
// (exit 0 or 1) where the file expects one, and serve gets past its
// command line to look for llama-server (here one that is not there);
// a refusal is the same message, naming the flag and saying why, in all
// three. None may fail on a flag as unknown where llama-server defines it.
func TestLlamaCppCommands(t *testing.T) {
	model, moe := synthFile(t, "qwen3-0.6b"), synthFile(t, "qwen3-30b-a3b")
	draft, proj := synthFile(t, "qwen3-0.6b"), projectorFile(t)
	var cmds []llamaCppCommand
	for _, f := range []string{"testdata/llamacpp-commands.txt", "testdata/everyday-commands.txt"} {
		cmds = append(cmds, readLlamaCppCommands(t, f)...)
	}
	if len(cmds) < 58 {
		t.Fatalf("%d commands read, want the files' 28 and 30 or more", len(cmds))
	}
	for _, c := range cmds {
		t.Run(c.from, func(t *testing.T) {
			args := substituteModels(c.args, model, moe, draft, proj)
			refusals := map[string]string{}
			for _, cmd := range []string{"fit", "plan", "serve"} {
				pre := []string{cmd, "--quiet", "--machine", "rtx-4090"}
				if cmd == "serve" {
					pre = append(pre, "--llama-server", "/nonexistent/llama-server")
				}
				code, out, errs := run(t, append(append(pre, "--"), args...)...)
				if strings.Contains(errs, "flag provided but not defined") || strings.Contains(errs, "unknown flag") {
					if !strings.HasPrefix(c.expect, "refused ") {
						t.Errorf("%s %q: a flag taken as unknown:\n%s", cmd, c.args, errs)
					}
				}
				first, _, _ := strings.Cut(out, "\n")
				switch flag, word, _ := strings.Cut(strings.TrimPrefix(c.expect, "refused "), ": "); {
				case c.expect == "verdict" && cmd == "fit":
					if (code != 0 && code != 1) || !(strings.HasPrefix(first, "fits") || strings.HasPrefix(first, "does not fit")) {
						t.Errorf("fit %q: exit %d, want a verdict\n%s%s", c.args, code, out, errs)
					}
				case c.expect == "verdict" && cmd == "plan":
					if (code != 0 && code != 1) || code == 0 && !strings.Contains(out, "llama-") {
						t.Errorf("plan %q: exit %d, want a plan or does not fit\n%s%s", c.args, code, out, errs)
					}
				case cmd == "serve" && code == 2 && strings.Contains(errs, whyServeCompanions):
					// serve loads a catalog entry's companions only.
				case c.expect == "verdict":
					if code != 1 || !strings.Contains(errs, "/nonexistent/llama-server") {
						t.Errorf("serve %q: exit %d, want it to look for llama-server\n%s%s", c.args, code, out, errs)
					}
				case code != 2 || !strings.Contains(errs, flag) || !strings.Contains(errs, word):
					t.Errorf("%s %q: exit %d, want 2 with a refusal that names %s and says %q\n%s%s", cmd, c.args, code, flag, word, out, errs)
				default:
					said, _, _ := strings.Cut(strings.TrimPrefix(errs, "headroom "+cmd+": "), "\n")
					refusals[cmd] = strings.ReplaceAll(said, "'headroom "+cmd+" --help'", "'headroom CMD --help'")
				}
			}
			if refusals["fit"] != refusals["plan"] || refusals["serve"] != "" && refusals["fit"] != refusals["serve"] {
				t.Errorf("%q refused three ways:\n%q", c.args, refusals)
			}
		})
	}
}

// substituteModels replaces the files of a documented command line with
// synth files: the model (-m, --model, -hf; the one fit-params planned,
// a Qwen3-30B-A3B, by a MoE of that shape), the draft (-md) and the
// projector (--mmproj). -hff names a file within -hf's repository and
// goes with it.
func substituteModels(args []string, model, moe, draft, proj string) []string {
	var out []string
	var split []string
	for _, a := range args {
		if name, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "-") {
			split = append(split, name, v)
			continue
		}
		split = append(split, a)
	}
	args = split
	for i := 0; i < len(args); i++ {
		a := args[i]
		if i+1 >= len(args) {
			out = append(out, a)
			continue
		}
		switch a {
		case "-m", "--model", "-hf", "-hfr", "--hf-repo":
			m := model
			if strings.Contains(args[i+1], "30b3a") {
				m = moe
			}
			out = append(out, "-m", m)
		case "-hff", "--hf-file":
		case "-md", "--model-draft":
			out = append(out, a, draft)
		case "--mmproj", "-mm":
			out = append(out, a, proj)
		default:
			out = append(out, a)
			continue
		}
		i++
	}
	return out
}
