package server

import (
	"strings"
	"testing"
)

// TestRuntime drives the fake runtime through the API: a load reaches it
// as sent, the instance is listed, and unloading it removes it.
func TestRuntime(t *testing.T) {
	rt := newFakeRuntime()
	h := newTestHandler(t, func(c *Config) { c.Runtime = rt })

	status, _, body := do(t, h, "GET", "/api/instances", "", nil)
	if status != 200 || len(decode[struct{ Instances []Instance }](t, body).Instances) != 0 {
		t.Fatalf("before any load: status %d: %s", status, body)
	}

	status, _, body = do(t, h, "POST", "/api/load", "application/json; charset=utf-8",
		strings.NewReader(`{"model":"qwen3-8b/Q4_K_M","ctx":16384,"parallel":2}`))
	if status != 200 {
		t.Fatalf("load: status %d: %s", status, body)
	}
	inst := decode[Instance](t, body)
	if inst.ID != "i1" || inst.State != "ready" || inst.URL == "" {
		t.Errorf("load answered %+v, want the runtime's instance", inst)
	}
	if len(rt.loads) != 1 || rt.loads[0] != (LoadRequest{Model: "qwen3-8b/Q4_K_M", Ctx: 16384, Parallel: 2}) {
		t.Errorf("the runtime got %+v, want the request as sent", rt.loads)
	}

	status, _, body = do(t, h, "GET", "/api/instances", "", nil)
	list := decode[struct{ Instances []Instance }](t, body).Instances
	if status != 200 || len(list) != 1 || list[0].ID != "i1" {
		t.Errorf("instances: status %d, %+v, want i1", status, list)
	}

	status, _, body = do(t, h, "POST", "/api/unload", "application/json", strings.NewReader(`{"id":"i1"}`))
	if status != 200 || !strings.Contains(string(body), `"unloaded"`) {
		t.Errorf("unload: status %d: %s", status, body)
	}
	if n := len(rt.Instances()); n != 0 {
		t.Errorf("%d instances after unloading, want 0", n)
	}
	status, _, body = do(t, h, "POST", "/api/unload", "application/json", strings.NewReader(`{"id":"i1"}`))
	if status != 404 {
		t.Errorf("second unload: status %d, want 404: %s", status, body)
	}
}

// TestNoRuntime pins that a server without a runtime still lists (no)
// instances rather than failing the panel.
func TestNoRuntime(t *testing.T) {
	status, _, body := do(t, newTestHandler(t, nil), "GET", "/api/instances", "", nil)
	if status != 200 || strings.TrimSpace(string(body)) != "{\n  \"provider\": false,\n  \"instances\": [],\n  \"events\": []\n}" {
		t.Errorf("status %d: %s", status, body)
	}
}

func TestNewNeedsMachine(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Machine") {
		t.Errorf("New without Machine: %v, want an error naming it", err)
	}
}
