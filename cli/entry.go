package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/suggest"
)

// entryQuant turns a catalog entry named alone (ENTRY, no /QUANT) into the
// variant it means on snap, catalog.Pick's: the quant recommend ranks
// first among the entry's here, else the smallest. It says which on
// standard error in one line. Any other reference comes back as given; a
// name that is neither a file nor an entry but close to one is an error
// that names it.
func entryQuant(env Env, ref string, snap *hw.Snapshot, parallel int, fitTarget int64, rules *builds.Rules) (string, error) {
	if ref == "" || strings.ContainsAny(ref, "/\\:") || strings.HasSuffix(ref, ".gguf") {
		return ref, nil
	}
	if _, err := os.Stat(ref); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return ref, nil
	}
	cat, err := catalog.Load()
	if err != nil {
		return "", err
	}
	e := cat.Entry(ref)
	if e == nil {
		ids := make([]string, len(cat.Entries))
		for i := range cat.Entries {
			ids[i] = cat.Entries[i].ID
		}
		if s := suggest.Closest(ref, ids); s != "" {
			return "", usagef("%s is neither a file nor a catalog entry (did you mean %s? headroom recommend --all lists them)", ref, s)
		}
		return ref, nil
	}
	lock, err := catalog.LoadLock()
	if err != nil {
		return "", err
	}
	o := catalog.DefaultOptions()
	if parallel > 0 {
		o.Parallel = parallel
	}
	if fitTarget > 0 {
		o.FitTarget = fitTarget
	}
	o.Rules = rules
	if dir := cacheDir(env, "recommend"); dir != "" {
		o.Cache, o.Build = dirCache{dir, cacheMaxAge}, buildID()
	}
	v, fits, rows, err := catalog.Pick(cat, lock, e, snap, o)
	if err != nil {
		return "", err
	}
	quants := make([]string, len(rows))
	for i, r := range rows {
		quants[i] = r.Quant
	}
	why := "the quant recommend ranks first here"
	if !fits {
		why = "the smallest: none of its quants fits here"
	}
	fmt.Fprintf(env.Stderr, "%s: planning %s/%s, %s (of %s)\n", e.ID, e.ID, v.Quant, why, strings.Join(quants, ", "))
	return e.ID + "/" + v.Quant, nil
}
