// Package suggest finds the known name a mistyped one most likely meant,
// for "did you mean" in errors about commands, flags, presets and catalog
// entries.
package suggest

import "strings"

// Closest returns the candidate that word most likely means, or "" when
// none is near enough to say so: a candidate word is the start of (as
// "ctx" of "ctx-size"), else the one fewest edits away (insertions,
// deletions, substitutions and swaps of neighbours, case ignored) when
// that is at most a third of the word's length, and at least one. Ties go
// to the earlier candidate.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	if w == "" {
		return ""
	}
	// A word that begins a candidate is that candidate cut short; where
	// several begin with it, one where it is a whole word ("ctx" of
	// "ctx-size") before one where it is not ("ctxcp"), and the shortest.
	prefix, whole := "", false
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if len(w) < 3 || !strings.HasPrefix(lc, w) || lc == w {
			continue
		}
		w2 := lc[len(w)] == '-' || lc[len(w)] == '_'
		if prefix == "" || w2 && !whole || w2 == whole && len(c) < len(prefix) {
			prefix, whole = c, w2
		}
	}
	if prefix != "" {
		return prefix
	}
	best, bestD := "", max(1, len([]rune(w))/3)+1
	for _, c := range candidates {
		if d := distance(w, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the optimal string alignment distance of a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
