package source

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
)

// listing is a repository's file list at one commit, as the Hub API gives
// it, in the Hub's order. It is cached as JSON, so its fields are stable.
type listing struct {
	Repo   string       `json:"repo"`
	Commit string       `json:"commit"`
	Files  []listedFile `json:"files"`
}

type listedFile struct {
	Path string `json:"path"`
	// Size is -1 when the Hub did not say.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
}

var fileTagRE = regexp.MustCompile(`[-.]([A-Za-z0-9_]+)$`)

// nameTag returns the quant tag llama.cpp reads from a GGUF file name: the
// last '-' or '.' separated word before the shard suffix and ".gguf",
// upper-cased ("model-Q4_K_M-00001-of-00003.gguf" gives "Q4_K_M").
func nameTag(p string) string {
	stem, ok := strings.CutSuffix(p, ".gguf")
	if !ok {
		return ""
	}
	if prefix, _, _, ok := gguf.SplitName(p); ok {
		stem = prefix
	}
	m := fileTagRE.FindStringSubmatch(stem)
	if m == nil {
		return ""
	}
	return strings.ToUpper(m[1])
}

// quantBits is the number in a quant tag (Q4_K_M gives 4, F16 gives 16),
// which llama.cpp uses to pair a projector with a model.
func quantBits(p string) int {
	tag := nameTag(p)
	i := strings.IndexAny(tag, "0123456789")
	if i < 0 {
		return 0
	}
	j := i
	for j < len(tag) && j-i < 6 && tag[j] >= '0' && tag[j] <= '9' {
		j++
	}
	n, _ := strconv.Atoi(tag[i:j])
	return n
}

// isModelFile reports whether a listed path is a GGUF model that llama.cpp
// would consider loading, and, for split models, is its first shard.
func isModelFile(p string) bool {
	if !strings.HasSuffix(p, ".gguf") {
		return false
	}
	// Projectors, importance matrices and draft heads are not models by
	// themselves; llama.cpp skips names carrying these marks.
	base := path.Base(p)
	for _, mark := range []string{"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"} {
		if strings.Contains(base, mark) {
			return false
		}
	}
	if _, no, count, ok := gguf.SplitName(p); ok && count > 1 && no != 1 {
		return false
	}
	return true
}

// tagMatcher follows llama.cpp: the tag, case-insensitively, anywhere in the
// path, followed by '.' or '-'.
func tagMatcher(tag string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)` + regexp.QuoteMeta(tag) + `[.-]`)
}

// pickFiles chooses the model files of r (all shards, in order) and the
// projector llama.cpp would load with it, if any.
func pickFiles(l *listing, r Ref) (shards []listedFile, mmproj *listedFile, err error) {
	var primary listedFile
	where := l.Repo + "@" + shortRev(r.Revision, l.Commit)
	switch {
	case r.File != "":
		primary, err = findFile(l, r.File, where)
	default:
		primary, err = pickModel(l, r.Tag, where)
	}
	if err != nil {
		return nil, nil, err
	}
	shards, err = shardsOf(l, primary, where)
	if err != nil {
		return nil, nil, err
	}
	return shards, findMMProj(l, primary.Path), nil
}

func shortRev(rev, commit string) string {
	if rev == commit || rev == "" {
		return commit[:min(len(commit), 12)]
	}
	return rev
}

func findFile(l *listing, name, where string) (listedFile, error) {
	var folded []listedFile
	for _, f := range l.Files {
		if f.Path == name {
			return f, nil
		}
		if strings.EqualFold(f.Path, name) {
			folded = append(folded, f)
		}
	}
	if len(folded) == 1 {
		return folded[0], nil
	}
	return listedFile{}, fmt.Errorf("%s has no file %q; its GGUF files are: %s", where, name, ggufList(l))
}

func pickModel(l *listing, tag, where string) (listedFile, error) {
	var models []listedFile
	for _, f := range l.Files {
		if isModelFile(f.Path) {
			models = append(models, f)
		}
	}
	if len(models) == 0 {
		return listedFile{}, fmt.Errorf("%s has no GGUF model files (found: %s)", where, ggufList(l))
	}
	if tag == "" {
		// llama.cpp's -hf OWNER/REPO tries these tags, in order, before
		// falling back to the first model file.
		for _, t := range []string{"Q4_K_M", "Q8_0"} {
			re := tagMatcher(t)
			for _, f := range models {
				if re.MatchString(f.Path) {
					return f, nil
				}
			}
		}
		return models[0], nil
	}
	var matches []listedFile
	re := tagMatcher(tag)
	for _, f := range models {
		if re.MatchString(f.Path) {
			matches = append(matches, f)
		}
	}
	switch len(matches) {
	case 0:
		return listedFile{}, fmt.Errorf("no GGUF model file in %s matches quant tag %q; available quant tags: %s",
			where, tag, tagList(models))
	case 1:
		return matches[0], nil
	}
	// llama.cpp silently takes the first match, which can be the wrong model
	// (tag F16 also matches BF16), so make the user choose.
	names := make([]string, len(matches))
	example := matches[0].Path
	for i, f := range matches {
		names[i] = f.Path
		if strings.EqualFold(nameTag(f.Path), tag) {
			example = f.Path
		}
	}
	return listedFile{}, fmt.Errorf("quant tag %q is ambiguous in %s: it matches %s (llama.cpp's -hf would take %s); "+
		"name the file instead, as in hf:%s/%s; available quant tags: %s",
		tag, where, strings.Join(names, ", "), matches[0].Path, l.Repo, example, tagList(models))
}

// shardsOf returns every shard of the split model that first belongs to,
// or just first when it is not a shard.
func shardsOf(l *listing, first listedFile, where string) ([]listedFile, error) {
	prefix, _, count, ok := gguf.SplitName(first.Path)
	if !ok || count == 1 {
		return []listedFile{first}, nil
	}
	byPath := make(map[string]listedFile, len(l.Files))
	for _, f := range l.Files {
		byPath[f.Path] = f
	}
	shards := make([]listedFile, count)
	for i := range shards {
		name := gguf.ShardName(prefix, i+1, count)
		f, ok := byPath[name]
		if !ok {
			return nil, fmt.Errorf("%s is split into %d shards, but shard %d, %s, is not in %s", first.Path, count, i+1, name, where)
		}
		shards[i] = f
	}
	return shards, nil
}

// findMMProj picks the multimodal projector llama.cpp would load with the
// model: one in the model's directory or an ancestor of it, the deepest
// first, then the one whose quant bits are closest to the model's.
func findMMProj(l *listing, model string) *listedFile {
	modelDir := strings.Split(path.Dir(model), "/")
	if path.Dir(model) == "." {
		modelDir = nil
	}
	bits := quantBits(model)
	var best *listedFile
	bestDepth, bestDiff := 0, 0
	for i, f := range l.Files {
		if !strings.HasSuffix(f.Path, ".gguf") || !strings.Contains(f.Path, "mmproj") {
			continue
		}
		var dir []string
		if d := path.Dir(f.Path); d != "." {
			dir = strings.Split(d, "/")
		}
		if len(dir) > len(modelDir) || strings.Join(dir, "/") != strings.Join(modelDir[:len(dir)], "/") {
			continue
		}
		diff := quantBits(f.Path) - bits
		if diff < 0 {
			diff = -diff
		}
		if best == nil || len(dir) > bestDepth || (len(dir) == bestDepth && diff < bestDiff) {
			best, bestDepth, bestDiff = &l.Files[i], len(dir), diff
		}
	}
	if best == nil {
		return nil
	}
	f := *best
	return &f
}

// tagList names the quant tags of models, in listing order, for errors.
func tagList(models []listedFile) string {
	var tags []string
	seen := map[string]bool{}
	for _, f := range models {
		t := nameTag(f.Path)
		if t == "" {
			t = f.Path
		}
		if !seen[t] {
			seen[t] = true
			tags = append(tags, t)
		}
	}
	return strings.Join(tags, ", ")
}

// ggufList names a listing's GGUF files for errors, bounded so a huge
// repository does not flood the terminal.
func ggufList(l *listing) string {
	const most = 20
	var names []string
	n := 0
	for _, f := range l.Files {
		if strings.HasSuffix(strings.ToLower(f.Path), ".gguf") {
			if n < most {
				names = append(names, f.Path)
			}
			n++
		}
	}
	switch {
	case n == 0:
		return "none"
	case n > most:
		return strings.Join(names, ", ") + fmt.Sprintf(" and %d more", n-most)
	}
	return strings.Join(names, ", ")
}
