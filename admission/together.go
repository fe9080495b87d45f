package admission

import (
	"maps"
	"slices"
)

// SafeTogether is the largest k such that every k of the models fit
// together: in each domain, the k largest needs add up to no more than
// what is available, the arithmetic the ledger admits by (serve-api's, and the --models-max of plan --router-preset) (each
// plan left --fit-target free on its own; beside each other they are
// held to the domain's size, as the ledger holds them). Each domain is a sum of its own, so the k models that
// need the most there are the worst set for it, whichever they are. limit
// names the domain that stops k+1 ("" when every model fits together).
// k is at least 1 for models that fit alone.
func SafeTogether(needs []map[string]int64, avail map[string]int64) (k int, limit string) {
	k = len(needs)
	for _, d := range slices.Sorted(maps.Keys(avail)) {
		var col []int64
		for _, n := range needs {
			col = append(col, n[d])
		}
		slices.Sort(col)
		slices.Reverse(col)
		var sum int64
		fit := 0
		for _, n := range col {
			if sum+n > avail[d] {
				break
			}
			sum += n
			fit++
		}
		if fit < k {
			k, limit = fit, d
		}
	}
	return k, limit
}
