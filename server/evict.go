package server

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/internal/units"
	"github.com/headroom-llm/headroom/plan"
)

// Resident is a loaded model as the eviction choice sees it: what its
// booking holds in each memory domain and whether it may be stopped.
type Resident struct {
	Name string
	// Need is its booking's bytes per domain.
	Need     map[string]int64
	LastUsed time.Time
	Pinned   bool
	// InFlight counts the requests it is answering.
	InFlight int
	// Loading says it is not ready yet: it is never stopped to make room.
	Loading bool
}

// evictable reports whether r may be stopped to make room at all: a
// model answering requests may, once they are answered.
func (r Resident) evictable() bool { return !r.Pinned && !r.Loading }

// NoRoom is a load that cannot fit even with every model that may be
// stopped stopped: nothing was stopped for it.
type NoRoom struct {
	Model string
	// Short is each domain still short with every evictable model gone.
	Short map[string]int64
	// Kept names the models that hold memory in those domains and may not
	// be stopped, with why (pinned, loading).
	Kept []string
}

func (e *NoRoom) Error() string {
	var parts []string
	for _, d := range sortedKeys(e.Short) {
		parts = append(parts, fmt.Sprintf("%s is short by %s", d, units.Size(e.Short[d])))
	}
	s := fmt.Sprintf("%s cannot be loaded: %s even with every unpinned model stopped", e.Model, strings.Join(parts, " and "))
	if len(e.Kept) > 0 {
		s += "; kept: " + strings.Join(e.Kept, ", ")
	} else {
		s += "; no model headroom serves holds memory there"
	}
	return s + "; nothing was stopped"
}

// maxExact bounds the residents the choice searches exhaustively; beyond
// it (more models loaded than any machine holds in practice) it takes
// them least recently used first.
const maxExact = 16

// ChooseEvictions picks the models to stop so that a load short by short
// (bytes per domain) fits: the fewest that free every short domain, and
// among sets that size the least recently used. Idle models are chosen
// first; models answering requests only when the idle ones do not make
// room, and the caller waits for their answers before it stops them,
// rather than refusing a load for memory that is about to be free (a
// request whose client has its answer counts as in flight until its
// handler returns). Pinned and loading models are never chosen, nor one
// that frees nothing that is short. When no set suffices it returns a
// *NoRoom that says what stays short and what holds it.
func ChooseEvictions(model string, short map[string]int64, residents []Resident) ([]string, error) {
	need := map[string]int64{}
	for d, n := range short {
		if n > 0 {
			need[d] = n
		}
	}
	if len(need) == 0 {
		return nil, nil
	}
	var cands []Resident
	for _, busyToo := range []bool{false, true} {
		cands = candidates(residents, need, busyToo)
		if len(remaining(need, cands)) == 0 {
			return cover(need, cands), nil
		}
	}
	return nil, noRoom(model, remaining(need, cands), residents)
}

// candidates are the residents that may be stopped and free memory in a
// short domain, idle ones only unless busyToo, least recently used first
// so that the first cover found of each size prefers the oldest; the name
// breaks ties for a stable answer.
func candidates(residents []Resident, need map[string]int64, busyToo bool) []Resident {
	var cands []Resident
	for _, r := range residents {
		if r.evictable() && (busyToo || r.InFlight == 0) && frees(r, need) {
			cands = append(cands, r)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if !cands[i].LastUsed.Equal(cands[j].LastUsed) {
			return cands[i].LastUsed.Before(cands[j].LastUsed)
		}
		return cands[i].Name < cands[j].Name
	})
	return cands
}

// cover picks from cands, which together cover need, the fewest that do,
// the first such set in cands' order.
func cover(need map[string]int64, cands []Resident) []string {
	if len(cands) > maxExact {
		var out []Resident
		for _, c := range cands {
			out = append(out, c)
			if len(remaining(need, out)) == 0 {
				return names(out)
			}
		}
	}
	for k := 1; k <= len(cands); k++ {
		if set := firstCover(need, cands, k); set != nil {
			return names(set)
		}
	}
	return names(cands) // unreachable: all of them cover
}

// firstCover is the first k-subset of cands, in lexicographic order,
// whose memory covers need; nil when none does.
func firstCover(need map[string]int64, cands []Resident, k int) []Resident {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	set := make([]Resident, k)
	for {
		for i, j := range idx {
			set[i] = cands[j]
		}
		if len(remaining(need, set)) == 0 {
			return set
		}
		// Next combination.
		i := k - 1
		for i >= 0 && idx[i] == len(cands)-k+i {
			i--
		}
		if i < 0 {
			return nil
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

// remaining is what stays short after stopping set.
func remaining(need map[string]int64, set []Resident) map[string]int64 {
	left := map[string]int64{}
	for d, n := range need {
		for _, r := range set {
			n -= r.Need[d]
		}
		if n > 0 {
			left[d] = n
		}
	}
	return left
}

func frees(r Resident, need map[string]int64) bool {
	for d := range need {
		if r.Need[d] > 0 {
			return true
		}
	}
	return false
}

func noRoom(model string, left map[string]int64, residents []Resident) *NoRoom {
	e := &NoRoom{Model: model, Short: left}
	for _, r := range residents {
		if r.evictable() || !frees(r, left) {
			continue
		}
		var why []string
		if r.Pinned {
			why = append(why, "pinned")
		}
		if r.Loading {
			why = append(why, "loading")
		}
		e.Kept = append(e.Kept, fmt.Sprintf("%s (%s)", r.Name, strings.Join(why, ", ")))
	}
	return e
}

func names(rs []Resident) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Shortfall is how many bytes each domain lacks in an assessment that
// does not fit.
func Shortfall(a *plan.Assessment) map[string]int64 {
	out := map[string]int64{}
	if a == nil {
		return out
	}
	for _, d := range a.Domains {
		if d.Margin < 0 {
			out[d.ID] = -d.Margin
		}
	}
	return out
}
