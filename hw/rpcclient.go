package hw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// RPCServerInfo is what an rpc-server says of itself over llama.cpp's RPC
// protocol: the figures llama-server --rpc reads when it loads.
type RPCServerInfo struct {
	Endpoint string     `json:"endpoint"`
	Version  RPCVersion `json:"version"`
	Devices  []RPCDeviceInfo
}

// RPCDeviceInfo is one device an rpc-server serves, by its index on that
// server. The protocol gives no name, backend or type: a server backed by
// its CPU reports the host's RAM, one backed by a GPU the card's memory.
type RPCDeviceInfo struct {
	Index int
	// Free and Total are GET_DEVICE_MEMORY's (ggml_backend_dev_memory on
	// the server), which llama.cpp's --fit and default split read.
	Free, Total uint64
	// Alignment is GET_ALIGNMENT's: the alignment of the device's buffer
	// type, which every tensor in its buffers is rounded up to.
	Alignment uint64
	// MaxSize is GET_MAX_SIZE's: the largest buffer the device's buffer
	// type allocates at once (SIZE_MAX for the CPU and CUDA).
	MaxSize uint64
}

// rpcConn is one connection that has passed HELLO.
type rpcConn struct {
	c       net.Conn
	version RPCVersion
}

// dialRPC connects and says HELLO. rpc-server serves one client at a time,
// so while a llama-server holds its connection the HELLO goes unanswered;
// ctx's deadline (or timeout, when ctx has none) bounds that wait.
func dialRPC(ctx context.Context, endpoint string, timeout time.Duration) (*rpcConn, error) {
	if err := checkEndpoint(endpoint); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", endpoint)
	if err != nil {
		return nil, fmt.Errorf("rpc-server %s: connecting: %w", endpoint, err)
	}
	dl, _ := ctx.Deadline()
	if err := c.SetDeadline(dl); err != nil {
		c.Close()
		return nil, fmt.Errorf("rpc-server %s: %w", endpoint, err)
	}
	// Closing the connection when ctx ends unblocks a read in progress.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	conn := &rpcConn{c: c}
	b, err := conn.call(rpcCmdHello, make([]byte, rpcConnCaps), 4+rpcConnCaps)
	if err == nil {
		conn.version, err = parseHello(b)
	}
	if err != nil {
		c.Close()
		if errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil {
			return nil, fmt.Errorf("rpc-server %s: no answer to HELLO in time (it serves one client at a time: is a llama-server connected to it?): %w", endpoint, err)
		}
		return nil, fmt.Errorf("rpc-server %s: HELLO: %w (expected protocol %d.x; an older server closes the connection)", endpoint, err, RPCProtoMajor)
	}
	if conn.version.Major != RPCProtoMajor {
		c.Close()
		return nil, fmt.Errorf("rpc-server %s speaks protocol %s, expected %d.x as llama.cpp at the pinned commit", endpoint, conn.version, RPCProtoMajor)
	}
	return conn, nil
}

func (r *rpcConn) call(cmd byte, payload []byte, reply int) ([]byte, error) {
	if _, err := r.c.Write(rpcRequest(cmd, payload)); err != nil {
		return nil, fmt.Errorf("command %d: writing: %w", cmd, err)
	}
	b, err := readRPCReply(r.c, reply)
	if err != nil {
		return nil, fmt.Errorf("command %d: %w", cmd, err)
	}
	return b, nil
}

func (r *rpcConn) u64(cmd byte, device uint32) (uint64, error) {
	b, err := r.call(cmd, deviceRequest(device), 8)
	if err != nil {
		return 0, err
	}
	return parseU64(b)
}

// maxRPCDevices bounds the device count a server may claim before the
// client asks about each (llama.cpp's servers expose a handful).
const maxRPCDevices = 64

// ProbeRPC asks the rpc-server at endpoint for its protocol version and,
// for each of its devices, the memory, alignment and largest buffer it
// reports: what llama-server --rpc sees of it. timeout bounds the whole
// exchange when ctx has no deadline.
func ProbeRPC(ctx context.Context, endpoint string, timeout time.Duration) (*RPCServerInfo, error) {
	conn, err := dialRPC(ctx, endpoint, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.c.Close()
	stop := context.AfterFunc(ctx, func() { conn.c.Close() })
	defer stop()
	info := &RPCServerInfo{Endpoint: endpoint, Version: conn.version}
	b, err := conn.call(rpcCmdDeviceCount, nil, 4)
	if err != nil {
		return nil, fmt.Errorf("rpc-server %s: DEVICE_COUNT: %w", endpoint, err)
	}
	n, err := parseU32(b)
	if err != nil {
		return nil, fmt.Errorf("rpc-server %s: DEVICE_COUNT: %w", endpoint, err)
	}
	if n == 0 || n > maxRPCDevices {
		return nil, fmt.Errorf("rpc-server %s reports %d devices, expected 1 to %d", endpoint, n, maxRPCDevices)
	}
	for i := range n {
		d := RPCDeviceInfo{Index: int(i)}
		b, err := conn.call(rpcCmdGetDeviceMemory, deviceRequest(i), 16)
		if err == nil {
			d.Free, d.Total, err = parseMemory(b)
		}
		if err != nil {
			return nil, fmt.Errorf("rpc-server %s device %d: GET_DEVICE_MEMORY: %w", endpoint, i, err)
		}
		if d.Alignment, err = conn.u64(rpcCmdGetAlignment, i); err != nil {
			return nil, fmt.Errorf("rpc-server %s device %d: GET_ALIGNMENT: %w", endpoint, i, err)
		}
		if d.Alignment == 0 || d.Alignment&(d.Alignment-1) != 0 {
			return nil, fmt.Errorf("rpc-server %s device %d: alignment %d, expected a power of two", endpoint, i, d.Alignment)
		}
		if d.MaxSize, err = conn.u64(rpcCmdGetMaxSize, i); err != nil {
			return nil, fmt.Errorf("rpc-server %s device %d: GET_MAX_SIZE: %w", endpoint, i, err)
		}
		info.Devices = append(info.Devices, d)
	}
	return info, nil
}

// RPCAllocSize asks device of the rpc-server at endpoint how many bytes its
// buffer type allocates for a contiguous tensor of ggml type typ and shape
// ne (GET_ALLOC_SIZE): a backend may pad some tensors (CUDA pads the rows
// of quantized matrices), which llama.cpp asks the server about when a
// quantized row is not a multiple of 512. typeSize and blockSize are
// ggml's for typ.
func RPCAllocSize(ctx context.Context, endpoint string, timeout time.Duration, device, typ uint32, ne [4]uint32, typeSize, blockSize uint32) (uint64, error) {
	conn, err := dialRPC(ctx, endpoint, timeout)
	if err != nil {
		return 0, err
	}
	defer conn.c.Close()
	stop := context.AfterFunc(ctx, func() { conn.c.Close() })
	defer stop()
	b, err := conn.call(rpcCmdGetAllocSize, allocSizeRequest(device, typ, ne, typeSize, blockSize), 8)
	if err != nil {
		return 0, fmt.Errorf("rpc-server %s device %d: GET_ALLOC_SIZE: %w", endpoint, device, err)
	}
	return parseU64(b)
}
