package hw

import (
	"strings"
	"testing"
)

func TestJoin(t *testing.T) {
	local, _ := LoadMachine("rtx-4090")
	gpus, _ := LoadMachine("2x-rtx-3090")
	cpuOnly, _ := LoadMachine("cpu-32")
	mac, _ := LoadMachine("m4-max-128")
	j, err := Join(local, []Remote{{Endpoint: "10.0.0.2:50052", Snapshot: gpus}, {Endpoint: "box:50052", Snapshot: cpuOnly}, {Endpoint: "[fe80::1]:50052", Snapshot: mac}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, domain, buft string }{
		{"RPC0", "10.0.0.2:50052/gpu0", "CUDA0"},
		{"RPC1", "10.0.0.2:50052/gpu1", "CUDA1"},
		{"RPC2", "box:50052/ram", "CPU"},
		{"RPC3", "[fe80::1]:50052/unified", "MTL0"},
	}
	var rpc []Device
	for _, d := range j.Devices {
		if d.Backend == BackendRPC {
			rpc = append(rpc, d)
		}
	}
	if len(rpc) != len(want) {
		t.Fatalf("%d RPC devices, want %d: %+v", len(rpc), len(want), rpc)
	}
	for i, w := range want {
		d := rpc[i]
		if d.Name != w.name || d.Domain != w.domain || !strings.HasSuffix(d.Description, w.buft) {
			t.Errorf("device %d: %s on %s (%s), want %s on %s (%s)", i, d.Name, d.Domain, d.Description, w.name, w.domain, w.buft)
		}
		if dom := j.Domain(d.Domain); dom == nil || d.Total <= 0 && dom.Capacity <= 0 {
			t.Errorf("%s: domain %s missing or empty", d.Name, d.Domain)
		}
	}
	if rpc[1].RemoteIndex != 1 || rpc[2].RemoteIndex != 0 {
		t.Errorf("remote indexes %d, %d; want each server's own numbering (1, 0)", rpc[1].RemoteIndex, rpc[2].RemoteIndex)
	}
	if got := strings.Join(j.RPC, ","); got != "10.0.0.2:50052,box:50052,[fe80::1]:50052" {
		t.Errorf("rpc endpoints %s", got)
	}
	if len(local.Devices) == len(j.Devices) || local.RPC != nil {
		t.Error("Join changed its input")
	}
	// A joined machine file reads back as it was written.
	var b strings.Builder
	if err := j.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeMachine([]byte(b.String()))
	if err != nil || len(back.Devices) != len(j.Devices) || len(back.RPC) != 3 {
		t.Errorf("round trip: %v", err)
	}
}

func TestJoinRejects(t *testing.T) {
	local, _ := LoadMachine("rtx-4090")
	gpus, _ := LoadMachine("2x-rtx-3090")
	joined, err := Join(local, []Remote{{Endpoint: "10.0.0.2:50052", Snapshot: gpus}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		remotes []Remote
		want    string
	}{
		{"no port", []Remote{{Endpoint: "10.0.0.2", Snapshot: gpus}}, "host:port"},
		{"bad port", []Remote{{Endpoint: "10.0.0.2:99999", Snapshot: gpus}}, "port"},
		{"twice", []Remote{{Endpoint: "h:1", Snapshot: gpus}, {Endpoint: "h:1", Snapshot: gpus}}, "twice"},
		{"no snapshot", []Remote{{Endpoint: "h:1", Snapshot: nil}}, "no snapshot"},
		{"a joined host", []Remote{{Endpoint: "h:1", Snapshot: joined}}, "does not forward"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Join(local, c.remotes); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error about %q", err, c.want)
			}
		})
	}
	// A machine file whose RPC device names an endpoint it does not list.
	bad := *joined
	bad.RPC = nil
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "does not list") {
		t.Errorf("validate: %v", err)
	}
}

// TestJoinProbe joins an rpc-server from what it reported of itself: each
// device is its own domain, with the server's figures and alignment, and
// says where they came from.
func TestJoinProbe(t *testing.T) {
	local, _ := LoadMachine("rtx-4090")
	p := &RPCServerInfo{Endpoint: "10.0.0.3:50052", Version: RPCVersion{6, 0, 0}, Devices: []RPCDeviceInfo{
		{Index: 0, Free: 20 << 30, Total: 24 << 30, Alignment: 128, MaxSize: ^uint64(0)},
		{Index: 1, Free: 10 << 30, Total: 16 << 30, Alignment: 256, MaxSize: 1 << 30},
	}}
	gpus, _ := LoadMachine("2x-rtx-3090")
	j, err := Join(local, []Remote{{Endpoint: "10.0.0.2:50052", Snapshot: gpus}, {Endpoint: p.Endpoint, Probe: p}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name, domain string
		index        int
		total, free  int64
		align        int64
	}{
		{"RPC2", "10.0.0.3:50052/dev0", 0, 24 << 30, 20 << 30, 128},
		{"RPC3", "10.0.0.3:50052/dev1", 1, 16 << 30, 10 << 30, 256},
	} {
		var d *Device
		for i := range j.Devices {
			if j.Devices[i].Name == w.name {
				d = &j.Devices[i]
			}
		}
		if d == nil {
			t.Fatalf("no %s in %+v", w.name, j.Devices)
		}
		if d.Domain != w.domain || d.RemoteIndex != w.index || d.Total != w.total || d.Free == nil || *d.Free != w.free || d.Alignment != w.align {
			t.Errorf("%s: %+v", w.name, d)
		}
		if !strings.Contains(d.Source, "RPC protocol (v6.0.0)") || !strings.Contains(j.Domain(d.Domain).Source, "GET_DEVICE_MEMORY") {
			t.Errorf("%s: source %q does not say the server reported it", w.name, d.Source)
		}
	}
	if got := strings.Join(j.RPC, ","); got != "10.0.0.2:50052,10.0.0.3:50052" {
		t.Errorf("rpc endpoints %s", got)
	}
}
