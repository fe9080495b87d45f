package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/internal/atomicfile"
	"github.com/headroom-llm/headroom/llamaflags"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/units"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

// routerPresetRefuses are plan's flags that have no place in a presets
// file: companions of one model, and what reports on one plan.
var routerPresetRefuses = map[string]bool{
	"mm": true, "mmproj": true, "no-mmproj-offload": true, "md": true, "model-draft": true,
	"image-min-tokens": true, "image-max-tokens": true,
	"ngld": true, "gpu-layers-draft": true, "n-gpu-layers-draft": true,
	"print-args": true, "json": true, "verify": true, "bench": true,
}

// presetModel is one model's section of a router presets file.
type presetModel struct {
	// Name is the section's name, which clients send as "model".
	Name string
	// Source are the keys that say where llama-server finds the file.
	Source [][2]string
	Flags  []string
	// Need is what the plan holds in each memory domain.
	Need map[string]int64
	// Note is a comment line about the source, "" for none.
	Note string
}

// runRouterPreset plans each model alone on snap and writes llama-server's
// router presets INI to path: one section per model with its planned
// flags, and the --models-max that is safe for the set.
func runRouterPreset(ctx context.Context, env Env, out presetOut, refs []string, snap *hw.Snapshot, opts plan.SearchOptions, quiet bool) error {
	if len(refs) == 0 {
		return usagef("--router-preset needs at least one MODEL")
	}
	// Before anything is planned: a file that is not a preset this
	// command wrote (a model named where the INI should be) is not
	// replaced, and a link is not followed.
	if err := out.check(); err != nil {
		return err
	}
	path := out.path
	var models []presetModel
	var avail map[string]int64
	seen := map[string]string{}
	for _, ref := range refs {
		in, err := openInputs(ctx, env, ref, quiet)
		if err != nil {
			return err
		}
		if in.ArchErr != nil {
			return fmt.Errorf("%s: --router-preset plans only the architectures headroom models: %v", ref, in.ArchErr)
		}
		p, err := plan.Search(in.Arch, snap, opts)
		if err != nil {
			return err
		}
		if p.Chosen == nil || p.Chosen.Result == nil {
			return fmt.Errorf("%s does not fit this machine even alone: %s", ref, strings.Join(p.Explain, "; "))
		}
		m, err := presetSource(in)
		if err != nil {
			return err
		}
		if other, dup := seen[m.Name]; dup {
			return usagef("%s and %s would both be named %q in the presets file", other, ref, m.Name)
		}
		seen[m.Name] = ref
		m.Flags = p.Chosen.Flags
		m.Need, avail = map[string]int64{}, map[string]int64{}
		for _, d := range p.Chosen.Result.Domains {
			m.Need[d.ID] = d.Required
			avail[d.ID] = d.Available
		}
		models = append(models, m)
	}
	needs := make([]map[string]int64, len(models))
	for i, m := range models {
		needs[i] = m.Need
	}
	k, limit := admission.SafeTogether(needs, avail)
	if k == 0 {
		// llama-server reads --models-max 0 as no limit at all; a plan
		// that fits alone makes this unreachable.
		return fmt.Errorf("no model of the set fits this machine: %s is short", limit)
	}
	says := modelsMaxSays(k, len(models), limit)
	ini, err := renderPreset(models, k, says)
	if err != nil {
		return err
	}
	// Written whole or not at all, by a rename that replaces a link
	// rather than writing through it.
	if err := atomicfile.WriteFile(path, []byte(ini)); err != nil {
		return fmt.Errorf("--router-preset: %w", err)
	}
	fmt.Fprintf(env.Stdout, "wrote %s: %d model(s)\n%s\n  llama-server --models-preset %s --models-max %d\n", path, len(models), says, path, k)
	return nil
}

// presetHeader is the first line of every presets file headroom writes:
// what --router-preset may replace without --force.
const presetHeader = "; llama-server router presets written by headroom plan --router-preset\n"

// routerPresetFlags are --router-preset FILE and --force.
func routerPresetFlags(fs *flags) (*string, *bool) {
	return fs.String("router-preset", "", "write to this file a llama-server router presets INI (--models-preset) for every MODEL given, one section each with its planned flags, and the --models-max safe for that set on this machine"),
		fs.Bool("force", false, "with --router-preset: replace FILE even where it is not a presets file headroom wrote")
}

// presetOut is where --router-preset writes, and whether --force lets it
// replace a file it did not write.
type presetOut struct {
	path  string
	force bool
}

// check refuses a destination that is a link, not a regular file, or a
// file headroom did not write (unless --force).
func (o presetOut) check() error {
	fi, err := os.Lstat(o.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--router-preset %s: %w", o.path, err)
	case fi.Mode()&os.ModeSymlink != 0:
		return usagef("--router-preset %s is a symbolic link: not followed; name the file itself", o.path)
	case !fi.Mode().IsRegular():
		return usagef("--router-preset %s is not a regular file", o.path)
	case o.force:
		return nil
	}
	f, err := os.Open(o.path)
	if err != nil {
		return fmt.Errorf("--router-preset %s: %w", o.path, err)
	}
	defer f.Close()
	head := make([]byte, len(presetHeader))
	if n, _ := io.ReadFull(f, head); n != len(head) || string(head) != presetHeader {
		return usagef("--router-preset %s exists and is not a presets file headroom wrote (%s): not replaced; name a new file, or give --force", o.path, units.Size(fi.Size()))
	}
	return nil
}

// presetSource names a model as llama-server's router would, and says
// where the router finds its file.
func presetSource(in *modelInputs) (presetModel, error) {
	if in.Header == nil {
		// A catalog variant: its locked file on the Hub.
		src := strings.TrimPrefix(catalogSource(in.Ref), "hf:")
		repo, file, commit := splitHubSource(src)
		if file == "" {
			// OWNER/REPO:QUANT, as llama-server's -hf takes it.
			return presetModel{Name: in.Ref, Source: [][2]string{{"hf-repo", repo}}}, nil
		}
		m := presetModel{Name: in.Ref, Source: [][2]string{{"hf-repo", repo}, {"hf-file", file}}}
		if commit != "" {
			m.Note = "headroom's lock pins commit " + commit + "; llama-server downloads the file as the repository has it now"
		}
		return m, nil
	}
	a := in.Header.Artifact
	if len(a.Files) == 0 {
		return presetModel{}, fmt.Errorf("%s: no file", in.Ref)
	}
	switch a.Kind {
	case source.KindLocal:
		abs, err := filepath.Abs(a.Files[0].Path)
		if err != nil {
			return presetModel{}, err
		}
		// As llama-server's router names the files of --models-dir.
		name := strings.TrimSuffix(filepath.Base(abs), filepath.Ext(abs))
		return presetModel{Name: name, Source: [][2]string{{"model", abs}}}, nil
	case source.KindHF:
		m := presetModel{Name: a.Repo + "/" + a.Files[0].Name, Source: [][2]string{{"hf-repo", a.Repo}, {"hf-file", a.Files[0].Name}}}
		if a.Commit != "" {
			m.Note = "planned on commit " + a.Commit + "; llama-server downloads the file as the repository has it now"
		}
		return m, nil
	case source.KindURL:
		return presetModel{Name: strings.TrimSuffix(filepath.Base(a.Files[0].Name), ".gguf"), Source: [][2]string{{"model-url", a.Files[0].URL}}}, nil
	}
	return presetModel{}, fmt.Errorf("%s: a %s reference has no place in a presets file", in.Ref, a.Kind)
}

// splitHubSource splits "owner/repo/path/file.gguf@commit".
func splitHubSource(s string) (repo, file, commit string) {
	s, commit, _ = strings.Cut(s, "@")
	parts := strings.SplitN(s, "/", 3)
	if len(parts) < 3 {
		return s, "", commit
	}
	return parts[0] + "/" + parts[1], parts[2], commit
}

// modelsMaxSays is why --models-max is what it is, in one line.
func modelsMaxSays(k, n int, limit string) string {
	switch {
	case k == n:
		return fmt.Sprintf("--models-max %d: all %d models fit together on this machine", k, n)
	case k == 1:
		return fmt.Sprintf("--models-max 1: each of these %d models fits this machine alone; the two that need the most in %s do not fit together", n, limit)
	}
	return fmt.Sprintf("--models-max %d: any %d of these %d models fit together on this machine; the %d that need the most in %s do not", k, k, n, k+1, limit)
}

// renderPreset writes the presets file: one section per model, keys as
// llama-server's flags without their dashes (its README's "Model
// presets"), a flag without a value as "= true".
func renderPreset(models []presetModel, k int, says string) (string, error) {
	var b strings.Builder
	b.WriteString(presetHeader)
	fmt.Fprintf(&b, "; %s\n", says)
	fmt.Fprintf(&b, "; start the router with: llama-server --models-preset FILE --models-max %d\n", k)
	b.WriteString("; --models-max counts every model the router runs, these and any other\n")
	b.WriteString("; (its cache, --models-dir): it is safe for these models alone.\n")
	b.WriteString("version = 1\n")
	for _, m := range models {
		if err := iniName(m.Name); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\n[%s]\n", m.Name)
		var mem []string
		for _, d := range slices.Sorted(maps.Keys(m.Need)) {
			if m.Need[d] > 0 {
				mem = append(mem, d+" "+units.Size(m.Need[d]))
			}
		}
		fmt.Fprintf(&b, "; planned to hold %s\n", strings.Join(mem, ", "))
		if m.Note != "" {
			fmt.Fprintf(&b, "; %s\n", m.Note)
		}
		for _, kv := range m.Source {
			if err := iniValue(kv[0], kv[1], true); err != nil {
				return "", fmt.Errorf("%s: %w", m.Name, err)
			}
			fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
		}
		kvs, err := presetKeys(m.Flags)
		if err != nil {
			return "", fmt.Errorf("%s: %w", m.Name, err)
		}
		for _, kv := range kvs {
			fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
		}
	}
	return b.String(), nil
}

// iniName refuses a section name llama.cpp's preset parser would read as
// something else: "*" is its section for every model, and brackets, line
// breaks, ";", "#" and "=" end or split the header.
func iniName(name string) error {
	if name == "" || name == "*" || strings.ContainsAny(name, "[]\n\r;#=") || strings.TrimSpace(name) != name {
		return fmt.Errorf("%q cannot name a section of llama-server's presets file (its parser would read it as another section or cut it): rename the file", name)
	}
	return nil
}

// iniValue refuses a value llama.cpp's preset parser would split: it ends
// a value at ";" or "#", and a line break starts a key of its own (a
// path through a directory named with one would add keys). A path (the
// model's file) is held to more: no brackets or "=", which no model path
// needs and a section header or key would.
func iniValue(key, v string, path bool) error {
	bad := "\n\r;#"
	if path {
		bad += "[]="
	}
	if strings.ContainsAny(v, bad) || strings.TrimSpace(v) != v {
		return fmt.Errorf("%s's value %q cannot be written in an INI line of llama-server's presets file: its parser would cut or split it at %q", key, v, strings.Trim(bad, "\n\r"))
	}
	return nil
}

// presetKeys turns llama-server flags into preset keys and values, each
// flag's values counted by the build's argument table (llamaflags): a
// flag without one is "= true".
func presetKeys(flags []string) ([][2]string, error) {
	tb, err := llamaflags.Union()
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for i := 0; i < len(flags); i++ {
		f := flags[i]
		key := strings.TrimLeft(f, "-")
		if !strings.HasPrefix(f, "-") || key == "" {
			return nil, fmt.Errorf("flag %d is %q, expected one starting with -", i, f)
		}
		e := tb.Lookup(f)
		switch {
		case e == nil:
			return nil, fmt.Errorf("%s is not a flag of llama-server %s", f, tb.Build)
		case e.Values == 0:
			out = append(out, [2]string{key, "true"})
			continue
		case e.Values > 1:
			return nil, fmt.Errorf("%s takes %d values, which a preset line cannot hold", f, e.Values)
		case i+1 >= len(flags):
			return nil, fmt.Errorf("%s has no value", f)
		}
		v := flags[i+1]
		if err := iniValue(f, v, false); err != nil {
			return nil, err
		}
		out = append(out, [2]string{key, v})
		i++
	}
	return out, nil
}
