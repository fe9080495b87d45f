package hw

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The wire format of llama.cpp's RPC backend (ggml/src/ggml-rpc/ggml-rpc.cpp
// at the pinned commit, protocol 6.0.0), as far as a client that only asks
// questions needs it. Every integer is little-endian.
//
//	request:  command (1 byte) | payload size (8 bytes) | payload
//	reply:    payload size (8 bytes) | payload
//
// The first command on a connection must be HELLO; the server closes the
// connection on anything else.

// RPC commands (enum rpc_cmd). HELLO is fixed at 14 across versions.
const (
	rpcCmdGetAlignment    = 1
	rpcCmdGetMaxSize      = 2
	rpcCmdGetDeviceMemory = 11
	rpcCmdGetAllocSize    = 13
	rpcCmdHello           = 14
	rpcCmdDeviceCount     = 15
)

// RPCProtoMajor is the protocol major version this client speaks: a server
// of another major version is refused, as llama.cpp's own client refuses it.
const RPCProtoMajor = 6

// rpcConnCaps is RPC_CONN_CAPS_SIZE: the transport capabilities HELLO
// carries both ways (all zero: plain TCP, no RDMA).
const rpcConnCaps = 24

// rpcMaxReply bounds a reply's declared size before anything is read or
// allocated: every reply this client expects is a few dozen bytes.
const rpcMaxReply = 1 << 10

// ggml's limits that size a serialized tensor (ggml.h).
const (
	ggmlMaxDims     = 4
	ggmlMaxSrc      = 10
	ggmlMaxOpParams = 64
	ggmlMaxName     = 64
)

// rpcTensorSize is sizeof(rpc_tensor), a packed struct: id, type, buffer,
// ne[4] and nb[4] as uint32, op, op_params, flags, src[10], view_src,
// view_offs, data, name, use_count.
const rpcTensorSize = 8 + 4 + 8 + 4*ggmlMaxDims + 4*ggmlMaxDims + 4 + ggmlMaxOpParams + 4 + 8*ggmlMaxSrc + 8 + 8 + 8 + ggmlMaxName + 4

// RPCVersion is a protocol version as HELLO reports it.
type RPCVersion struct{ Major, Minor, Patch uint8 }

func (v RPCVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// rpcRequest frames one command.
func rpcRequest(cmd byte, payload []byte) []byte {
	b := make([]byte, 0, 9+len(payload))
	b = append(b, cmd)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	return append(b, payload...)
}

// deviceRequest is the payload of the per-device questions: the server's
// device index as uint32.
func deviceRequest(device uint32) []byte {
	return binary.LittleEndian.AppendUint32(nil, device)
}

// readRPCReply reads one reply of exactly want bytes. The size is checked
// before the payload is read, so a hostile or confused peer cannot make
// the client allocate or wait for more than it asked for.
func readRPCReply(r io.Reader, want int) ([]byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("reading the reply's size: %w", err)
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n != uint64(want) {
		return nil, fmt.Errorf("reply of %d bytes, expected %d", n, want)
	}
	if want > rpcMaxReply {
		return nil, fmt.Errorf("reply of %d bytes exceeds the %d this client accepts", want, rpcMaxReply)
	}
	b := make([]byte, want)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("reading the %d-byte reply: %w", want, err)
	}
	return b, nil
}

// parseHello reads HELLO's reply: major, minor, patch, a padding byte and
// the server's transport capabilities.
func parseHello(b []byte) (RPCVersion, error) {
	if len(b) != 4+rpcConnCaps {
		return RPCVersion{}, fmt.Errorf("hello reply of %d bytes, expected %d", len(b), 4+rpcConnCaps)
	}
	return RPCVersion{b[0], b[1], b[2]}, nil
}

// parseU32 and parseU64 read a reply that is one integer.
func parseU32(b []byte) (uint32, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("reply of %d bytes, expected a 4-byte integer", len(b))
	}
	return binary.LittleEndian.Uint32(b), nil
}

func parseU64(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("reply of %d bytes, expected an 8-byte integer", len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

// parseMemory reads GET_DEVICE_MEMORY's reply: free, then total bytes.
// Free above total is what no backend reports; it is refused rather than
// planned with.
func parseMemory(b []byte) (free, total uint64, err error) {
	if len(b) != 16 {
		return 0, 0, fmt.Errorf("device memory reply of %d bytes, expected 16", len(b))
	}
	free, total = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	if free > total {
		return 0, 0, fmt.Errorf("device memory reply says %d bytes free of %d", free, total)
	}
	return free, total, nil
}

// allocSizeRequest is GET_ALLOC_SIZE's payload for a contiguous tensor of
// ggml type typ and shape ne with no sources and no buffer: the device
// index, the tensor, and ten empty source slots. typeSize and blockSize
// are ggml's for typ (bytes per block, elements per block).
func allocSizeRequest(device uint32, typ uint32, ne [ggmlMaxDims]uint32, typeSize, blockSize uint32) []byte {
	b := make([]byte, 4+rpcTensorSize*(1+ggmlMaxSrc))
	binary.LittleEndian.PutUint32(b, device)
	t := b[4 : 4+rpcTensorSize]
	// A non-zero id marks a present tensor; the server does not look it
	// up for this command.
	binary.LittleEndian.PutUint64(t[0:], 1)
	binary.LittleEndian.PutUint32(t[8:], typ)
	off := 20 // after id, type and buffer
	nb := [ggmlMaxDims]uint32{typeSize}
	nb[1] = typeSize * (ne[0] / max(blockSize, 1))
	nb[2], nb[3] = nb[1]*ne[1], nb[1]*ne[1]*ne[2]
	for i := range ggmlMaxDims {
		binary.LittleEndian.PutUint32(t[off+4*i:], ne[i])
		binary.LittleEndian.PutUint32(t[off+16+4*i:], nb[i])
	}
	return b
}
