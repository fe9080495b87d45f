package cli

import (
	"os"
	"strings"
	"testing"
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
		c.args = shellWords(t, line.String())
		out = append(out, c)
	}
	return out
}

// shellWords splits a command line as a POSIX shell does for the forms
// llama.cpp's documentation uses: single and double quotes, backslash
// escapes and line continuations; no expansion.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				w.WriteByte(s[i])
				inWord = true
			}
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				t.Fatalf("unclosed quote in %q", s)
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// TestLlamaCppCommands pastes llama.cpp's own documented llama-server
// command lines into fit, each model file replaced by a synth file of the
// same role (model, draft, projector): every line gets a verdict, or a
// refusal that names the flag and says why. None may fail on a flag as
// unknown where llama-server defines it.
func TestLlamaCppCommands(t *testing.T) {
	model, moe := synthFile(t, "qwen3-0.6b"), synthFile(t, "qwen3-30b-a3b")
	draft, proj := synthFile(t, "qwen3-0.6b"), projectorFile(t)
	cmds := readLlamaCppCommands(t, "testdata/llamacpp-commands.txt")
	if len(cmds) < 20 {
		t.Fatalf("%d commands read, want the file's 28", len(cmds))
	}
	for _, c := range cmds {
		t.Run(c.from, func(t *testing.T) {
			args := substituteModels(c.args, model, moe, draft, proj)
			code, out, errs := run(t, append([]string{"fit", "--quiet", "--machine", "rtx-4090", "--"}, args...)...)
			first, _, _ := strings.Cut(out, "\n")
			if strings.Contains(errs, "flag provided but not defined") || strings.Contains(errs, "unknown flag") {
				if !strings.HasPrefix(c.expect, "refused ") {
					t.Errorf("%q: a flag taken as unknown:\n%s", c.args, errs)
				}
			}
			switch flag, word, _ := strings.Cut(strings.TrimPrefix(c.expect, "refused "), ": "); {
			case c.expect == "verdict":
				if (code != 0 && code != 1) || !(strings.HasPrefix(first, "fits") || strings.HasPrefix(first, "does not fit")) {
					t.Errorf("%q: exit %d, want a verdict\n%s%s", c.args, code, out, errs)
				}
			case code != 2 || !strings.Contains(errs, flag) || !strings.Contains(errs, word):
				t.Errorf("%q: exit %d, want 2 with a refusal that names %s and says %q\n%s%s", c.args, code, flag, word, out, errs)
			default:
				t.Logf("refused: %s", strings.TrimSpace(errs))
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
