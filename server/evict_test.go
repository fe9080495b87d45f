package server

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestChooseEvictions(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	ram := func(n int64) map[string]int64 { return map[string]int64{"ram": n * mib} }
	tests := []struct {
		name      string
		short     map[string]int64
		residents []Resident
		want      []string
		noRoom    []string // substrings of the refusal; nil when a choice is wanted
	}{
		{"nothing short", map[string]int64{}, []Resident{{Name: "a", Need: ram(100)}}, nil, nil},
		{"least recently used of two that each suffice", ram(50), []Resident{
			{Name: "new", Need: ram(100), LastUsed: at(5)},
			{Name: "old", Need: ram(100), LastUsed: at(1)},
		}, []string{"old"}, nil},
		{"fewest beats oldest: one big instead of two small", ram(150), []Resident{
			{Name: "small1", Need: ram(80), LastUsed: at(1)},
			{Name: "small2", Need: ram(80), LastUsed: at(2)},
			{Name: "big", Need: ram(200), LastUsed: at(9)},
		}, []string{"big"}, nil},
		{"two needed, oldest pair", ram(150), []Resident{
			{Name: "a", Need: ram(100), LastUsed: at(3)},
			{Name: "b", Need: ram(100), LastUsed: at(1)},
			{Name: "c", Need: ram(100), LastUsed: at(2)},
		}, []string{"b", "c"}, nil},
		{"a model holding only an unshort domain is never stopped", map[string]int64{"gpu0": 100 * mib}, []Resident{
			{Name: "cpu-only", Need: ram(4000), LastUsed: at(0)},
			{Name: "on-gpu", Need: map[string]int64{"gpu0": 300 * mib, "ram": 10 * mib}, LastUsed: at(5)},
		}, []string{"on-gpu"}, nil},
		{"two domains short, one model frees each", map[string]int64{"gpu0": 100 * mib, "gpu1": 100 * mib}, []Resident{
			{Name: "g0", Need: map[string]int64{"gpu0": 200 * mib}, LastUsed: at(1)},
			{Name: "g1", Need: map[string]int64{"gpu1": 200 * mib}, LastUsed: at(2)},
			{Name: "both", Need: map[string]int64{"gpu0": 150 * mib, "gpu1": 150 * mib}, LastUsed: at(9)},
		}, []string{"both"}, nil},
		{"pinned never, busy only after idle", ram(50), []Resident{
			{Name: "pinned", Need: ram(100), LastUsed: at(0), Pinned: true},
			{Name: "busy", Need: ram(100), LastUsed: at(1), InFlight: 2},
			{Name: "idle", Need: ram(100), LastUsed: at(9)},
		}, []string{"idle"}, nil},
		{"busy when the idle ones do not make room", ram(150), []Resident{
			{Name: "pinned", Need: ram(300), LastUsed: at(0), Pinned: true},
			{Name: "busy", Need: ram(100), LastUsed: at(1), InFlight: 2},
			{Name: "idle", Need: ram(100), LastUsed: at(9)},
		}, []string{"busy", "idle"}, nil},
		{"a loading model is never stopped", ram(50), []Resident{
			{Name: "loading", Need: ram(100), Loading: true},
		}, nil, []string{"ram is short by 50 MiB", "loading (loading)", "nothing was stopped"}},
		{"cannot fit even with every stoppable model gone", ram(500), []Resident{
			{Name: "pinned", Need: ram(100), Pinned: true},
			{Name: "busy", Need: ram(100), InFlight: 1},
			{Name: "idle", Need: ram(200)},
		}, nil, []string{"ram is short by 200 MiB", "kept: pinned (pinned); nothing"}},
		{"nothing resident at all", ram(500), nil, nil, []string{"ram is short by 500 MiB", "no model headroom serves holds memory there"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChooseEvictions("m", tt.short, tt.residents)
			if tt.noRoom != nil {
				var nr *NoRoom
				if !errors.As(err, &nr) {
					t.Fatalf("got %v, %v; want a *NoRoom", got, err)
				}
				for _, s := range tt.noRoom {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("refusal %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("chose %v, want %v", got, tt.want)
			}
		})
	}
}

// TestChooseEvictionsMany holds the fallback beyond maxExact residents to
// what it promises: enough memory, oldest first.
func TestChooseEvictionsMany(t *testing.T) {
	var rs []Resident
	t0 := time.Now()
	for i := range maxExact + 4 {
		rs = append(rs, Resident{Name: string(rune('a' + i)), Need: map[string]int64{"ram": 10}, LastUsed: t0.Add(time.Duration(i) * time.Second)})
	}
	got, err := ChooseEvictions("m", map[string]int64{"ram": 25}, rs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("chose %v, want the three oldest", got)
	}
}
