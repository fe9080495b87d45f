package catalog

import (
	"fmt"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// Pick is the variant of e that a person naming the entry alone means:
// the one Recommend ranks first among e's variants on snap with o, or,
// where none fits, the smallest, which comes closest. fits says which of
// the two it is; rows are e's rows as Recommend gives them. The entry's
// capabilities, license and trained context are not filtered on: it was
// named.
func Pick(cat *Catalog, lock *LockFile, e *Entry, snap *hw.Snapshot, o Options) (v *Variant, fits bool, rows []Row, err error) {
	one := *cat
	one.Entries = []Entry{*e}
	o.Capabilities, o.Licenses = nil, nil
	if e.CtxTrained > 0 && (o.MinCtx <= 0 || o.MinCtx > e.CtxTrained) {
		o.MinCtx = e.CtxTrained
	}
	rows, err = Recommend(&one, lock, snap, o)
	if err != nil {
		return nil, false, nil, err
	}
	if len(rows) == 0 {
		return nil, false, nil, fmt.Errorf("%s has no variants", e.ID)
	}
	best := rows[0]
	fits = best.Verdict == plan.Fits
	if !fits {
		for _, r := range rows[1:] {
			if r.SizeBytes < best.SizeBytes {
				best = r
			}
		}
	}
	return e.Variant(best.Quant), fits, rows, nil
}
