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
	}
}

// refusedServerFlags change memory in ways headroom does not account yet:
// they are refused with the reason rather than ignored.
func refusedServerFlags() map[string]string {
	return map[string]string{
		"embedding":  "--embedding serves embeddings, with an output buffer of embeddings per token; headroom plans a generating server",
		"embeddings": "--embeddings serves embeddings, with an output buffer of embeddings per token; headroom plans a generating server",
		"lora":       "--lora adds an adapter's weights; headroom does not account them yet",
	}
}

// pasted turns a llama-server command line into headroom's: after "--",
// a program named llama-server is dropped; -m, --model and -hf name the
// model; flags f does not define that change nothing a load allocates are
// taken out and returned as ignored; flags that do change it and are not
// modeled are an error that says why.
func (f *flags) pasted(args []string) (out, ignored []string, err error) {
	for i, a := range args {
		if a == "--" && i+1 < len(args) && strings.HasPrefix(filepath.Base(args[i+1]), "llama-server") {
			args = append(args[:i:i], args[i+2:]...)
			break
		}
	}
	only, refused := serverOnlyFlags(), refusedServerFlags()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			out = append(out, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f.Lookup(name) != nil {
			out = append(out, a)
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
			out = append(out, v)
		case name == "hf" || name == "hf-repo" || name == "hfr":
			v, ok := takeValue()
			if !ok {
				return nil, nil, usagef("%s needs a Hugging Face repository (owner/repo[:quant])", a)
			}
			out = append(out, "hf:"+v)
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
	return out, ignored, nil
}

// sayIgnored lists the pasted flags that do not change memory.
func (f *flags) sayIgnored(ignored []string) {
	if len(ignored) > 0 {
		fmt.Fprintf(f.env.Stderr, "headroom %s: ignored, no effect on memory: %s\n", f.Name(), strings.Join(ignored, " "))
	}
}
