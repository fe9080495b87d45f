package catalog

import (
	"testing"

	"github.com/headroom-llm/headroom/plan"
)

// An entry alone is its first-ranked quant where one fits (the one
// Recommend ranks first among its variants), else its smallest.
func TestPick(t *testing.T) {
	cat, lock := mustLoad(t), emptyLock(t)
	for _, tc := range []struct {
		entry, preset string
		fits          bool
	}{
		{"llama-3.2-1b-instruct", "cpu-32", true},
		{"llama-3.3-70b-instruct", "m4-16", false},
	} {
		t.Run(tc.entry+"/"+tc.preset, func(t *testing.T) {
			e := cat.Entry(tc.entry)
			if e == nil || len(e.Variants) < 2 {
				t.Fatalf("%s: want an entry with several variants", tc.entry)
			}
			snap := machine_(t, tc.preset)
			v, fits, rows, err := Pick(cat, lock, e, snap, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if fits != tc.fits || len(rows) != len(e.Variants) {
				t.Fatalf("fits %v with %d rows, want %v with %d", fits, len(rows), tc.fits, len(e.Variants))
			}
			if fits {
				full, err := Recommend(cat, lock, snap, DefaultOptions())
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range full {
					if r.Entry == tc.entry {
						if r.Quant != v.Quant || r.Verdict != plan.Fits {
							t.Errorf("picked %s; recommend ranks %s (%s) first among %s's", v.Quant, r.Quant, r.Verdict, tc.entry)
						}
						break
					}
				}
				return
			}
			for _, r := range rows {
				if r.Verdict == plan.Fits {
					t.Errorf("%s/%s fits, yet none was said to", r.Entry, r.Quant)
				}
				if r.SizeBytes < rowOf(rows, v.Quant).SizeBytes {
					t.Errorf("picked %s, but %s is smaller", v.Quant, r.Quant)
				}
			}
		})
	}
}

func rowOf(rows []Row, quant string) Row {
	for _, r := range rows {
		if r.Quant == quant {
			return r
		}
	}
	return Row{}
}
