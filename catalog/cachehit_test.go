package catalog

import (
	"reflect"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// withFree is a copy of snap whose system domain had free bytes free.
func withFree(snap *hw.Snapshot, free int64) *hw.Snapshot {
	s := *snap
	s.Domains = append([]hw.Domain(nil), snap.Domains...)
	s.Domains[0].Free = &free
	return &s
}

// countingCache counts the writes of a MemoryCache: a write is a run that
// planned.
type countingCache struct {
	MemoryCache
	puts int
}

func (c *countingCache) Put(key string, data []byte) { c.puts++; c.MemoryCache.Put(key, data) }

// planned is a row without its reason, which quotes the free memory of
// the moment.
func planned(rows []Row) []Row {
	out := make([]Row, len(rows))
	for i, r := range rows {
		r.Reason = ""
		out[i] = r
	}
	return out
}

// Two runs whose free memory differs by a few MiB share one cache entry
// and give the same rows; a run with 2 GiB less free keeps the plans and
// shows the ones that no longer fit as not fitting now, with the
// shortfall; a run with more than a GiB more free plans again.
func TestRecommendCacheHits(t *testing.T) {
	cat, lock := mustLoad(t), emptyLock(t)
	base := machine_(t, "cpu-32")
	capacity := base.Domains[0].Capacity
	free := capacity - 9<<30 // 23 of 32 GiB free, as a desktop leaves it
	c := &countingCache{}
	o := DefaultOptions()
	o.Cache, o.Build = c, "test build"

	first, err := Recommend(cat, lock, withFree(base, free), o)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Recommend(cat, lock, withFree(base, free-7<<20), o)
	if err != nil {
		t.Fatal(err)
	}
	if c.puts != 1 || c.Len() != 1 {
		t.Fatalf("two runs 7 MiB apart wrote %d times into %d entries; want one plan kept under one key", c.puts, c.Len())
	}
	if !reflect.DeepEqual(planned(first), planned(second)) {
		for i := range first {
			if !reflect.DeepEqual(planned(first[i:i+1]), planned(second[i:i+1])) {
				t.Errorf("row %d moved: %+v then %+v", i, first[i], second[i])
			}
		}
		t.Fatal("rows differ between two runs 7 MiB apart")
	}

	// Two GiB less free, more than the fit target the plans leave: the
	// kept plans are judged again, not remade.
	less := free - 2<<30
	third, err := Recommend(cat, lock, withFree(base, less), o)
	if err != nil {
		t.Fatal(err)
	}
	if c.puts != 1 {
		t.Fatalf("a run with less free memory planned again (%d writes)", c.puts)
	}
	now := 0
	byName := map[string]Row{}
	for _, r := range first {
		byName[r.Entry+"/"+r.Quant] = r
	}
	for _, r := range third {
		was := byName[r.Entry+"/"+r.Quant]
		if was.Verdict != plan.Fits || r.Verdict == plan.Fits {
			continue
		}
		now++
		if !strings.HasPrefix(r.Reason, "does not fit now:") || r.Limiting == nil || r.Limiting.Shortfall <= 0 || r.Enabled || r.Rank != 0 {
			t.Errorf("%s/%s stopped fitting without a shortfall: %+v", r.Entry, r.Quant, r)
		}
		if r.Plan == nil || r.Plan.CtxPerSlot != was.Plan.CtxPerSlot {
			t.Errorf("%s/%s: the kept plan was not the one judged: %+v, was %+v", r.Entry, r.Quant, r.Plan, was.Plan)
		}
	}
	if now == 0 {
		t.Fatal("no row stopped fitting with 2 GiB less free: the recheck judged nothing")
	}

	// More than a GiB more free: plan again for the room there is now.
	if _, err := Recommend(cat, lock, withFree(base, free+2<<30), o); err != nil {
		t.Fatal(err)
	}
	if c.puts != 2 {
		t.Fatalf("2 GiB more free did not plan again (%d writes)", c.puts)
	}
}

// recheck's shortfall is the plan's need less what the domain has now.
func TestRecheck(t *testing.T) {
	o := outcome{Verdict: plan.Fits, Reason: "fits", Plan: &RowPlan{CtxPerSlot: 4096},
		Needs: []need{{"ram", 10 << 20}, {"gpu0", 4 << 20}}}
	for _, tc := range []struct {
		name    string
		now     map[string]int64
		verdict string
		limit   *Limit
	}{
		{"room", map[string]int64{"ram": 12 << 20, "gpu0": 8 << 20}, plan.Fits, nil},
		{"exact", map[string]int64{"ram": 10 << 20, "gpu0": 4 << 20}, plan.Fits, nil},
		{"ram short", map[string]int64{"ram": 9 << 20, "gpu0": 8 << 20}, plan.DoesNotFit, &Limit{"ram", 1 << 20}},
		{"both short, gpu more", map[string]int64{"ram": 9 << 20, "gpu0": 1 << 20}, plan.DoesNotFit, &Limit{"gpu0", 3 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := o.recheck(tc.now)
			if got.Verdict != tc.verdict || !reflect.DeepEqual(got.Limiting, tc.limit) {
				t.Errorf("got %s %+v (%s), want %s %+v", got.Verdict, got.Limiting, got.Reason, tc.verdict, tc.limit)
			}
			if got.Plan != o.Plan {
				t.Error("the plan was not kept")
			}
		})
	}
	dnf := outcome{Verdict: plan.DoesNotFit, Reason: "does not fit: x", Limiting: &Limit{"ram", 5}}
	if got := dnf.recheck(map[string]int64{"ram": 1 << 40}); !reflect.DeepEqual(got, dnf) {
		t.Errorf("a row that did not fit was judged again: %+v", got)
	}
}
