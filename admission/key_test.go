package admission

import (
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

func TestKeyChangesWithEveryInput(t *testing.T) {
	snap, err := hw.LoadMachine("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	base := Key{
		Artifacts: []string{"o/r@0123456789abcdef0123456789abcdef01234567/m.gguf#" + "ab"},
		Engine:    "b6789 (abc1234)",
		Topology:  Topology(snap),
		Execution: []string{"-c", "8192", "-ngl", "99"},
		Capacity:  Capacity(1<<30, false),
	}
	bigger := *snap
	bigger.Devices = append([]hw.Device(nil), snap.Devices...)
	for i := range bigger.Devices {
		if bigger.Devices[i].Type != hw.TypeCPU {
			bigger.Devices[i].Total += 1 << 30
		}
	}
	busier := *snap
	busier.Devices = append([]hw.Device(nil), snap.Devices...)
	for i := range busier.Devices {
		f := int64(1 << 30)
		busier.Devices[i].Free = &f
	}
	if Topology(&busier) != Topology(snap) {
		t.Error("topology changed with free memory; it must not, or no preview would ever be reused")
	}
	changes := map[string]func(k *Key){
		"artifact":  func(k *Key) { k.Artifacts = []string{"o/r@0123456789abcdef0123456789abcdef01234567/m.gguf#cd"} },
		"engine":    func(k *Key) { k.Engine = "b6790 (def5678)" },
		"topology":  func(k *Key) { k.Topology = Topology(&bigger) },
		"execution": func(k *Key) { k.Execution = []string{"-c", "16384", "-ngl", "99"} },
		"capacity":  func(k *Key) { k.Capacity = Capacity(1<<30, true) },
	}
	var c Cache
	c.Put(base, &plan.Result{})
	for name, change := range changes {
		k := base
		change(&k)
		if k.String() == base.String() {
			t.Errorf("%s changed, key did not", name)
		}
		if _, ok := c.Get(k); ok {
			t.Errorf("%s changed, the cached accounting was still found", name)
		}
	}
	same := base
	same.Execution = append([]string(nil), base.Execution...)
	if _, ok := c.Get(same); !ok || c.Hits() != 1 {
		t.Error("an equal key missed the cache")
	}
}

func TestCacheBound(t *testing.T) {
	c := Cache{Max: 2}
	keys := []Key{{Engine: "a"}, {Engine: "b"}, {Engine: "c"}}
	for _, k := range keys {
		c.Put(k, &plan.Result{})
	}
	if _, ok := c.Get(keys[0]); ok {
		t.Error("the oldest entry was kept beyond Max")
	}
	for _, k := range keys[1:] {
		if _, ok := c.Get(k); !ok {
			t.Errorf("entry %q dropped", k.Engine)
		}
	}
}
