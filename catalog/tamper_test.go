package catalog

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRecommendDoesNotBelieveAnEditedCache: outcomes edited to "fits"
// with needs of one byte (Kimi K2 in 0.0 GB on a 32 GB machine) are
// planned again, and a verdict the code does not know is too; the rest of
// the kept outcomes are still used.
func TestRecommendDoesNotBelieveAnEditedCache(t *testing.T) {
	cat, lock := mustLoad(t), emptyLock(t)
	snap := machine_(t, "cpu-32")
	c := &countingCache{}
	o := DefaultOptions()
	o.Cache, o.Build = c, "test build"
	first, err := Recommend(cat, lock, snap, o)
	if err != nil {
		t.Fatal(err)
	}
	var k kept
	for key, data := range c.MemoryCache.m {
		if err := json.Unmarshal(data, &k); err != nil {
			t.Fatal(err)
		}
		forged := 0
		for id, out := range k.Outcomes {
			if out.Verdict != "fits" && strings.Contains(id, "kimi") {
				out.Verdict, out.Reason = "fits", "fits"
				out.Needs = []need{{"ram", 1}}
				out.Plan = &RowPlan{Source: "search", Slots: 1, CtxPerSlot: 4096, MemoryBytes: 1}
				k.Outcomes[id] = out
				forged++
			}
		}
		if forged == 0 {
			t.Fatal("no Kimi K2 outcome to forge")
		}
		b, _ := json.Marshal(k)
		c.MemoryCache.Put(key, b)
	}
	second, err := Recommend(cat, lock, snap, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != len(first) {
		t.Fatalf("%d rows, then %d", len(first), len(second))
	}
	for i, r := range second {
		if strings.HasPrefix(r.Entry, "kimi") && (r.Enabled || r.Verdict != first[i].Verdict) {
			t.Errorf("%s/%s: %s (enabled %v) after the cache was edited, was %s", r.Entry, r.Quant, r.Verdict, r.Enabled, first[i].Verdict)
		}
	}
}
