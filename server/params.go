package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/hw"
)

// maxCtx bounds every context figure a request may give: far beyond any
// trained context, yet small enough that no product of it overflows.
const maxCtx = 16 << 20

// query is a request's parameters, checked against the ones its endpoint
// takes. The getters record the first bad value; err reports it.
type query struct {
	v   url.Values
	err error
}

// parseQuery rejects malformed queries, parameters the endpoint does not
// take, and parameters given twice (which one would win is a guess).
func parseQuery(r *http.Request, allowed ...string) (*query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("malformed query %q: %v", r.URL.RawQuery, err)
	}
	for name, vals := range v {
		if !slices.Contains(allowed, name) {
			takes := "no parameters"
			if len(allowed) > 0 {
				takes = strings.Join(allowed, ", ")
			}
			return nil, badRequest("unknown parameter %q for %s; it takes %s", name, r.URL.Path, takes)
		}
		if len(vals) > 1 {
			return nil, badRequest("parameter %q given %d times; give it once", name, len(vals))
		}
	}
	return &query{v: v}, nil
}

func (q *query) fail(format string, args ...any) {
	if q.err == nil {
		q.err = badRequest(format, args...)
	}
}

// str returns a parameter and whether it was given. A parameter given
// empty is an error: it says nothing, and defaulting it would hide a bug.
func (q *query) str(name string) (string, bool) {
	if _, ok := q.v[name]; !ok {
		return "", false
	}
	s := q.v.Get(name)
	if s == "" {
		q.fail("parameter %q is empty; give a value or leave it out", name)
		return "", false
	}
	return s, true
}

// intIn returns a whole number in [lo, hi], or def when absent.
func (q *query) intIn(name string, def, lo, hi int) int {
	s, ok := q.str(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		q.fail("%s must be a whole number from %d to %d, not %q", name, lo, hi, s)
		return def
	}
	return n
}

// oneOf returns a parameter that must be one of choices, or def.
func (q *query) oneOf(name, def string, choices ...string) string {
	s, ok := q.str(name)
	if !ok {
		return def
	}
	if !slices.Contains(choices, s) {
		q.fail("%s must be %s, not %q", name, orList(choices), s)
		return def
	}
	return s
}

// flag returns a boolean parameter (1, 0, true, false).
func (q *query) flag(name string) bool {
	s, ok := q.str(name)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		q.fail("%s must be 1 or 0, not %q", name, s)
	}
	return b
}

// list returns a comma-separated parameter's items, each one of choices.
func (q *query) list(name string, choices ...string) []string {
	s, ok := q.str(name)
	if !ok {
		return nil
	}
	var out []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if choices != nil && !slices.Contains(choices, item) {
			q.fail("%s: %q is not one of %s", name, item, strings.Join(choices, ", "))
			continue
		}
		out = append(out, item)
	}
	return out
}

func orList(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}

// machine is the snapshot a request plans against and the name the CLI's
// --json gives it.
type machine struct {
	snap *hw.Snapshot
	name string
	// preset is the preset's name; "" for this machine.
	preset string
}

// machineOnly is the machine of a request that takes no other parameter.
func (s *server) machineOnly(r *http.Request) (machine, error) {
	q, err := parseQuery(r, "machine")
	if err != nil {
		return machine{}, err
	}
	return s.machine(r.Context(), q)
}

// machine resolves the machine parameter. It takes preset names only: a
// request must never make the server read a file, so a name is looked up
// in the preset list before hw.LoadMachine sees it, and what it sees is the
// list's own spelling (a preset's name wins over a file of that name).
func (s *server) machine(ctx context.Context, q *query) (machine, error) {
	name, ok := q.str("machine")
	if q.err != nil {
		return machine{}, q.err
	}
	if !ok {
		snap, err := s.cfg.Machine(ctx)
		if err != nil {
			return machine{}, fmt.Errorf("taking a snapshot of this machine: %w", err)
		}
		return machine{snap: snap, name: "this machine"}, nil
	}
	var names []string
	for _, p := range hw.Presets() {
		if strings.EqualFold(p.Name, name) {
			snap, err := hw.LoadMachine(p.Name)
			if err != nil {
				return machine{}, fmt.Errorf("loading preset %q: %w", p.Name, err)
			}
			return machine{snap: snap, name: p.Name, preset: p.Name}, nil
		}
		names = append(names, p.Name)
	}
	return machine{}, notFound("no machine preset %q; machine takes a preset name (%s), or leave it out for this machine", name, strings.Join(names, ", "))
}
