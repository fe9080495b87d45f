package hw

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeRPC is an rpc-server stand-in on a loopback port that answers the
// questions ProbeRPC asks, one client at a time as the real one does.
// reply(cmd, payload) gives the reply's payload, or nil to answer nothing.
type fakeRPC struct {
	ln    net.Listener
	reply func(cmd byte, payload []byte) []byte
}

func startFakeRPC(t *testing.T, reply func(cmd byte, payload []byte) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRPC{ln: ln, reply: reply}
	t.Cleanup(func() { ln.Close() })
	go f.serve()
	return ln.Addr().String()
}

func (f *fakeRPC) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.client(c)
	}
}

func (f *fakeRPC) client(c net.Conn) {
	defer c.Close()
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := binary.LittleEndian.Uint64(hdr[1:])
		if n > 1<<20 {
			return
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		out := f.reply(hdr[0], payload)
		if out == nil {
			// Say nothing, as a server busy with another client does.
			time.Sleep(time.Hour)
			return
		}
		c.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(out))))
		c.Write(out)
	}
}

// goodServer answers as a v6.0.0 rpc-server with two devices: a 24 GiB
// card (128-byte alignment) and its host's 64 GiB (32-byte alignment).
func goodServer(cmd byte, payload []byte) []byte {
	le := binary.LittleEndian
	switch cmd {
	case rpcCmdHello:
		if len(payload) != rpcConnCaps {
			return []byte{}
		}
		return append([]byte{6, 0, 0, 0}, make([]byte, rpcConnCaps)...)
	case rpcCmdDeviceCount:
		return le.AppendUint32(nil, 2)
	case rpcCmdGetDeviceMemory:
		if le.Uint32(payload) == 0 {
			return le.AppendUint64(le.AppendUint64(nil, 20<<30), 24<<30)
		}
		return le.AppendUint64(le.AppendUint64(nil, 60<<30), 64<<30)
	case rpcCmdGetAlignment:
		if le.Uint32(payload) == 0 {
			return le.AppendUint64(nil, 128)
		}
		return le.AppendUint64(nil, 32)
	case rpcCmdGetMaxSize:
		return le.AppendUint64(nil, ^uint64(0))
	case rpcCmdGetAllocSize:
		if len(payload) != 4+rpcTensorSize*(1+ggmlMaxSrc) {
			return []byte{}
		}
		ne0 := le.Uint32(payload[4+20:])
		return le.AppendUint64(nil, uint64(ne0)*2)
	}
	return []byte{}
}

func TestProbeRPC(t *testing.T) {
	ep := startFakeRPC(t, goodServer)
	info, err := ProbeRPC(context.Background(), ep, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []RPCDeviceInfo{
		{Index: 0, Free: 20 << 30, Total: 24 << 30, Alignment: 128, MaxSize: ^uint64(0)},
		{Index: 1, Free: 60 << 30, Total: 64 << 30, Alignment: 32, MaxSize: ^uint64(0)},
	}
	if info.Version != (RPCVersion{6, 0, 0}) || len(info.Devices) != len(want) {
		t.Fatalf("got %+v", info)
	}
	for i, w := range want {
		if info.Devices[i] != w {
			t.Errorf("device %d: %+v, want %+v", i, info.Devices[i], w)
		}
	}
	n, err := RPCAllocSize(context.Background(), ep, 5*time.Second, 0, 2, [4]uint32{4160, 1, 1, 1}, 18, 32)
	if err != nil || n != 8320 {
		t.Errorf("alloc size %d, %v; want 8320", n, err)
	}
}

func TestProbeRPCRefuses(t *testing.T) {
	le := binary.LittleEndian
	with := func(cmd byte, out []byte) func(byte, []byte) []byte {
		return func(c byte, p []byte) []byte {
			if c == cmd {
				return out
			}
			return goodServer(c, p)
		}
	}
	for _, c := range []struct {
		name   string
		server func(byte, []byte) []byte
		want   string
	}{
		{"old major", with(rpcCmdHello, append([]byte{3, 0, 0, 0}, make([]byte, rpcConnCaps)...)), "protocol 3.0.0"},
		{"short hello", with(rpcCmdHello, []byte{6, 0, 0}), "expected 28"},
		{"no devices", with(rpcCmdDeviceCount, le.AppendUint32(nil, 0)), "0 devices"},
		{"too many devices", with(rpcCmdDeviceCount, le.AppendUint32(nil, 1<<30)), "expected 1 to"},
		{"free over total", with(rpcCmdGetDeviceMemory, le.AppendUint64(le.AppendUint64(nil, 2), 1)), "2 bytes free of 1"},
		{"odd alignment", with(rpcCmdGetAlignment, le.AppendUint64(nil, 48)), "power of two"},
		{"wrong size", with(rpcCmdGetMaxSize, []byte{1, 2, 3}), "expected 8"},
		{"busy", with(rpcCmdHello, nil), "no answer to HELLO in time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ep := startFakeRPC(t, c.server)
			_, err := ProbeRPC(context.Background(), ep, 300*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ep := startFakeRPC(t, with(rpcCmdDeviceCount, nil))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := ProbeRPC(ctx, ep, time.Hour); err == nil || time.Since(start) > 5*time.Second {
			t.Errorf("got %v after %v; want an error when ctx ends", err, time.Since(start))
		}
	})
	t.Run("bad endpoint", func(t *testing.T) {
		if _, err := ProbeRPC(context.Background(), "nohost", time.Second); err == nil || !strings.Contains(err.Error(), "host:port") {
			t.Errorf("got %v", err)
		}
	})
}

// FuzzReadRPCReply feeds arbitrary bytes to the reply reader and parsers:
// they must never panic, never read past what the size allows, and only
// accept replies of exactly the size asked for.
func FuzzReadRPCReply(f *testing.F) {
	le := binary.LittleEndian
	f.Add(le.AppendUint64(le.AppendUint64(nil, 16), 5), 16)
	f.Add(append(le.AppendUint64(nil, 28), 6, 0, 0, 0), 28)
	f.Add(le.AppendUint64(nil, 1<<62), 8)
	f.Add([]byte{}, 4)
	f.Fuzz(func(t *testing.T, data []byte, want int) {
		if want < 0 || want > 64 {
			return
		}
		b, err := readRPCReply(bytes.NewReader(data), want)
		if err != nil {
			return
		}
		if len(b) != want {
			t.Fatalf("accepted %d bytes, asked for %d", len(b), want)
		}
		parseHello(b)
		parseU32(b)
		parseU64(b)
		if free, total, err := parseMemory(b); err == nil && free > total {
			t.Fatalf("accepted %d free of %d", free, total)
		}
	})
}
