package server

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// poolStats are the pool's counters since it started, for /metrics (the
// events /api/instances keeps are only the last 256). p.mu guards them.
type poolStats struct {
	// stops by why: eviction, idle, unload, exit, stop (shutdown).
	stops map[string]int64
	// refusals by why: no_room (what holds the memory may not be
	// stopped), does_not_fit (not even alone).
	refusals map[string]int64
	failures int64
	// loads: how many took at most each of loadBounds seconds, their
	// count and their sum.
	loadBuckets []int64
	loads       int64
	loadSeconds float64
}

// loadBounds are the upper bounds of the load-time histogram, in
// seconds: a small model loads in seconds, a large one read from disk in
// minutes.
func loadBounds() []float64 { return []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600} }

func (s *poolStats) count(m *map[string]int64, key string) {
	if *m == nil {
		*m = map[string]int64{}
	}
	(*m)[key]++
}

func (s *poolStats) loaded(d time.Duration) {
	if s.loadBuckets == nil {
		s.loadBuckets = make([]int64, len(loadBounds()))
	}
	sec := d.Seconds()
	for i, b := range loadBounds() {
		if sec <= b {
			s.loadBuckets[i]++
		}
	}
	s.loads++
	s.loadSeconds += sec
}

// metricsSnapshot is what /metrics reads from the pool, copied under
// its lock.
type metricsSnapshot struct {
	models []PoolModel
	stats  poolStats
}

func (p *Pool) metrics() metricsSnapshot {
	models := p.Models()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.stops, st.refusals = maps.Clone(st.stops), maps.Clone(st.refusals)
	st.loadBuckets = slices.Clone(st.loadBuckets)
	return metricsSnapshot{models: models, stats: st}
}

// metrics answers /metrics in Prometheus' text format: the memory of
// each domain of this machine and what the provider's models hold in
// it, each model's state, requests in flight and waiting, and the
// loads, stops and refusals since the server started, with why.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	snap, err := s.cfg.Machine(r.Context())
	if err != nil {
		return fmt.Errorf("taking a snapshot of this machine: %w", err)
	}
	var b strings.Builder
	m := metricWriter{w: &b}
	m.family("headroom_domain_capacity_bytes", "gauge", "Bytes of each memory domain of this machine.")
	for _, d := range snap.Domains {
		m.sample("headroom_domain_capacity_bytes", float64(d.Capacity), "domain", d.ID)
	}
	m.family("headroom_domain_available_bytes", "gauge", "Bytes of each memory domain free for a new model, as the last probe saw it.")
	for _, d := range snap.Domains {
		m.sample("headroom_domain_available_bytes", float64(d.Available()), "domain", d.ID)
	}
	if s.cfg.Pool != nil {
		writePoolMetrics(&m, s.cfg.Pool.metrics())
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, err = io.WriteString(w, b.String())
	return err
}

func writePoolMetrics(m *metricWriter, ms metricsSnapshot) {
	booked := map[string]int64{}
	states := map[string]int{StateLoaded: 0, StateLoading: 0, StateStopping: 0, StateUnloaded: 0}
	m.family("headroom_model_booked_bytes", "gauge", "Bytes each served model's booking holds in each memory domain.")
	for _, pm := range ms.models {
		states[pm.State]++
		if pm.Child == nil {
			continue
		}
		need := pm.Child.Booking().Need
		for _, d := range slices.Sorted(maps.Keys(need)) {
			booked[d] += need[d]
			m.sample("headroom_model_booked_bytes", float64(need[d]), "model", pm.Name, "domain", d)
		}
	}
	m.family("headroom_booked_bytes", "gauge", "Bytes the served models' bookings hold in each memory domain, together.")
	for _, d := range slices.Sorted(maps.Keys(booked)) {
		m.sample("headroom_booked_bytes", float64(booked[d]), "domain", d)
	}
	m.family("headroom_models", "gauge", "Served models in each state.")
	for _, st := range slices.Sorted(maps.Keys(states)) {
		m.sample("headroom_models", float64(states[st]), "state", st)
	}
	m.family("headroom_requests_in_flight", "gauge", "Requests each served model is answering.")
	for _, pm := range ms.models {
		m.sample("headroom_requests_in_flight", float64(pm.InFlight), "model", pm.Name)
	}
	m.family("headroom_requests_waiting", "gauge", "Requests waiting for each served model to load (the queue).")
	for _, pm := range ms.models {
		m.sample("headroom_requests_waiting", float64(pm.Waiting), "model", pm.Name)
	}
	m.family("headroom_stops_total", "counter", "Served models stopped, by why: eviction (to make room), idle, unload (asked), exit (unasked), stop (shutdown).")
	for _, k := range slices.Sorted(maps.Keys(ms.stats.stops)) {
		m.sample("headroom_stops_total", float64(ms.stats.stops[k]), "reason", k)
	}
	m.family("headroom_refusals_total", "counter", "Loads refused, by why: no_room (what holds the memory may not be stopped), does_not_fit (not even alone).")
	for _, k := range slices.Sorted(maps.Keys(ms.stats.refusals)) {
		m.sample("headroom_refusals_total", float64(ms.stats.refusals[k]), "reason", k)
	}
	m.family("headroom_load_failures_total", "counter", "Loads whose llama-server did not start or prove ready.")
	m.sample("headroom_load_failures_total", float64(ms.stats.failures))
	m.family("headroom_load_seconds", "histogram", "Time from a model's first request to its readiness: plan, download, admission, load and a first completion.")
	for i, le := range loadBounds() {
		var n int64
		if ms.stats.loadBuckets != nil {
			n = ms.stats.loadBuckets[i]
		}
		m.sample("headroom_load_seconds_bucket", float64(n), "le", strconv.FormatFloat(le, 'g', -1, 64))
	}
	m.sample("headroom_load_seconds_bucket", float64(ms.stats.loads), "le", "+Inf")
	m.sample("headroom_load_seconds_sum", ms.stats.loadSeconds)
	m.sample("headroom_load_seconds_count", float64(ms.stats.loads))
}

// metricWriter writes Prometheus' text exposition format.
type metricWriter struct{ w *strings.Builder }

func (m *metricWriter) family(name, typ, help string) {
	fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// sample writes one sample; labels are name, value pairs.
func (m *metricWriter) sample(name string, v float64, labels ...string) {
	m.w.WriteString(name)
	if len(labels) > 0 {
		m.w.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				m.w.WriteByte(',')
			}
			fmt.Fprintf(m.w, "%s=\"%s\"", labels[i], labelEscape(labels[i+1]))
		}
		m.w.WriteByte('}')
	}
	fmt.Fprintf(m.w, " %s\n", strconv.FormatFloat(v, 'g', -1, 64))
}

// labelEscape escapes a label value as the format asks: a model's name
// is a request's, and may hold anything.
func labelEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}
