package cli

import (
	"fmt"
	"path/filepath"
	"strings"
)

// serverOnlyFlags are llama-server flags that change nothing a load
// allocates (threads, the HTTP server, sampling, logging, templates): a
// pasted llama-server command line keeps them, and fit and plan accept
// and list them as ignored. The value says whether the flag takes one.
func serverOnlyFlags() map[string]bool {
	return map[string]bool{
		"t": true, "threads": true, "tb": true, "threads-batch": true, "threads-http": true,
		"C": true, "cpu-mask": true, "Cb": true, "cpu-mask-batch": true, "prio": true, "prio-batch": true, "poll": true, "numa": true,
		"port": true, "host": true, "api-key": true, "api-key-file": true, "a": true, "alias": true, "path": true, "api-prefix": true,
		"ssl-key-file": true, "ssl-cert-file": true, "to": true, "timeout": true, "slot-save-path": true, "media-path": true,
		"temp": true, "top-k": true, "top-p": true, "min-p": true, "repeat-penalty": true, "repeat-last-n": true,
		"presence-penalty": true, "frequency-penalty": true, "n": true, "n-predict": true, "s": true, "seed": true,
		"log-file": true, "lv": true, "verbosity": true, "log-verbosity": true,
		"chat-template": true, "chat-template-file": true, "mcp-servers-config": true, "ui-config": true, "ui-config-file": true, "reasoning-format": true, "reasoning-budget": true,
		"metrics": false, "slots": false, "no-slots": false, "props": false, "no-webui": false, "jinja": false, "no-jinja": false,
		"cont-batching": false, "cb": false, "no-cont-batching": false, "nocb": false, "v": false, "verbose": false,
		"log-disable": false, "log-colors": true, "log-prefix": false, "log-timestamps": false, "no-warmup": false, "offline": false,
		// Reusing cached chunks by shifting the KV cache allocates nothing.
		"cache-reuse": true,
	}
}

// refusedServerFlags change memory in ways headroom does not account yet:
// they are refused with the reason rather than ignored.
func refusedServerFlags() map[string]string {
	router := "starts llama-server's router, which loads each model in a process of its own as requests ask for it: " +
		"fit one model at a time (-m FILE or -hf REPO:QUANT), or write the router's presets with headroom plan --router-preset"
	return map[string]string{
		"embedding":  "--embedding serves embeddings, with an output buffer of embeddings per token; headroom plans a generating server",
		"embeddings": "--embeddings serves embeddings, with an output buffer of embeddings per token; headroom plans a generating server",
		"lora":       "--lora adds an adapter's weights; headroom does not account them yet",
		// common/arg.cpp: the router's options; a router holds no model.
		"models-dir":         "--models-dir " + router,
		"models-preset":      "--models-preset " + router,
		"models-max":         "--models-max " + router,
		"models-autoload":    "--models-autoload " + router,
		"no-models-autoload": "--no-models-autoload " + router,
		// The EAGLE-3, DFlash, DSpark and MTP drafts read the target's
		// hidden states, and the n-gram types keep tables of their own.
		"spec-type": "--spec-type picks how drafts are made: the draft-eagle3, draft-dflash, draft-dspark and draft-mtp types " +
			"take the target's hidden states into draft models of their own, and the n-gram types keep tables of their own, " +
			"none of which headroom accounts yet; the default type, a draft model given with -md, is accounted",
	}
}

// envAssignment reports whether a word of a pasted line sets an
// environment variable for the program after it (NAME=VALUE).
func envAssignment(a string) bool {
	name, _, ok := strings.Cut(a, "=")
	if !ok || name == "" || strings.HasPrefix(name, "-") {
		return false
	}
	for i, r := range name {
		if r != '_' && !(r >= 'A' && r <= 'Z') && !(r >= 'a' && r <= 'z') && !(i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// dropProgram takes the pasted program out: after "--", a program named
// llama-server and any NAME=VALUE words before it, which are refused: the
// environment can change the devices llama.cpp sees (CUDA_VISIBLE_DEVICES)
// or its flags (LLAMA_ARG_*), and a pasted line's is not applied.
func dropProgram(args []string) (rest []string, pasted bool, err error) {
	for i, a := range args {
		if a != "--" {
			continue
		}
		j := i + 1
		for j < len(args) && envAssignment(args[j]) {
			j++
		}
		if j < len(args) && strings.HasPrefix(filepath.Base(args[j]), "llama-server") {
			if j > i+1 {
				return nil, true, usagef("%s sets llama-server's environment, which headroom does not apply from a pasted line: "+
					"it can hide devices or set flags (LLAMA_ARG_*), so a verdict without it could be for another load; "+
					"drop it, and name the devices with --machine if it hides some", strings.Join(args[i+1:j], " "))
			}
			return append(args[:i:i], args[j+1:]...), true, nil
		}
		break
	}
	return args, false, nil
}

// pasted turns a llama-server command line into headroom's: after "--",
// a program named llama-server is dropped; -m, --model and -hf (with
// -hff, a file of its repository) name the model; flags f does not define
// that change nothing a load allocates are taken out and returned as
// ignored; flags that do change it and are not modeled are an error that
// says why. A pasted llama-server line that names no model starts its
// router, which is refused.
func (f *flags) pasted(args []string) (out, ignored []string, err error) {
	args, program, err := dropProgram(args)
	if err != nil {
		return nil, nil, err
	}
	only, refused := serverOnlyFlags(), refusedServerFlags()
	hfAt, hfFile, model := -1, "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			model = model || i+1 < len(args)
			break
		}
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			out, model = append(out, a), true
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if fl := f.Lookup(name); fl != nil {
			out = append(out, a)
			// Its value is its own, whatever it looks like, as
			// llama-server reads it: "-fa -hf X" gives -fa the value -hf.
			if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && b.IsBoolFlag()) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		takeValue := func() (string, bool) {
			if hasValue {
				return value, true
			}
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return "", false
		}
		switch {
		case name == "m" || name == "model":
			v, ok := takeValue()
			if !ok {
				return nil, nil, usagef("%s needs the model file", a)
			}
			out, model = append(out, v), true
		case name == "hf" || name == "hf-repo" || name == "hfr":
			v, ok := takeValue()
			if !ok {
				return nil, nil, usagef("%s needs a Hugging Face repository (owner/repo[:quant])", a)
			}
			hfAt, model = len(out), true
			out = append(out, "hf:"+v)
		case name == "hff" || name == "hf-file":
			v, ok := takeValue()
			if !ok {
				return nil, nil, usagef("%s needs a file of the -hf repository", a)
			}
			hfFile = v
		case refused[name] != "":
			return nil, nil, usagef("%s", refused[name])
		default:
			needs, known := only[name]
			if !known {
				out = append(out, a)
				continue
			}
			said := a
			if needs && !hasValue {
				if v, ok := takeValue(); ok {
					said += " " + v
				}
			}
			ignored = append(ignored, said)
		}
	}
	switch {
	case hfFile != "" && hfAt < 0:
		return nil, nil, usagef("-hff %s names a file of the -hf repository, and no -hf was given", hfFile)
	case hfFile != "":
		// llama.cpp: the file overrides the quant of -hf REPO[:QUANT].
		repo, _, _ := strings.Cut(strings.TrimPrefix(out[hfAt], "hf:"), ":")
		out[hfAt] = "hf:" + repo + "/" + hfFile
	case program && !model:
		return nil, nil, usagef("llama-server with no model (-m, -hf) %s", strings.TrimPrefix(refused["models-dir"], "--models-dir "))
	}
	return out, ignored, nil
}

// sayIgnored lists the pasted flags that do not change memory.
func (f *flags) sayIgnored(ignored []string) {
	if len(ignored) > 0 {
		fmt.Fprintf(f.env.Stderr, "headroom %s: ignored, no effect on memory: %s\n", f.Name(), strings.Join(ignored, " "))
	}
}
