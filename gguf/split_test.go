package gguf

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// shard parses a header whose only tensor is name, with split keys set
// by set.
func shard(t *testing.T, name string, set func(b *Builder)) *File {
	t.Helper()
	b := NewBuilder()
	set(b)
	if err := b.AddTensor(name, TypeF32, []uint64{8}, nil); err != nil {
		t.Fatal(err)
	}
	r, size, err := b.ReaderAt()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read(r, size)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSplitShardsThatDisagree: shards that disagree on the split's tensor
// total, its shard count or the architecture were joined as one model
// (issue #30, item 9); each is refused with the shard named.
func TestSplitShardsThatDisagree(t *testing.T) {
	keys := func(no uint16, count uint16, tensors int32, arch string) func(*Builder) {
		return func(b *Builder) {
			if arch != "" {
				b.Set("general.architecture", StringValue(arch))
			}
			b.Set(KeySplitNo, Uint16Value(no)).Set(KeySplitCount, Uint16Value(count)).Set(KeySplitTensors, Int32Value(tensors))
		}
	}
	for _, tc := range []struct {
		name   string
		second func(*Builder)
		want   string // "" joins
	}{
		{"agreeing", keys(1, 2, 2, ""), ""},
		{"same architecture repeated", keys(1, 2, 2, "llama"), ""},
		{"tensor total", keys(1, 2, 3, ""), "shard 2 of the split has split.tensors.count = 3, but the first shard has 2"},
		{"shard count", keys(1, 3, 2, ""), "file 2 of the split has split.count 3, the first has 2"},
		{"architecture", keys(1, 2, 2, "qwen2"), `shard 2 of the split has general.architecture "qwen2", but the first shard has "llama"`},
		{"long architecture", keys(1, 2, 2, strings.Repeat("x", 1000)), `"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" (cut, 1000 bytes)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := shard(t, "a", keys(0, 2, 2, "llama"))
			second := shard(t, "b", tc.second)
			m, err := NewModel(first, second)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("NewModel: %v", err)
				}
				if len(m.Tensors) != 2 {
					t.Errorf("%d tensors, want 2", len(m.Tensors))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewModel: %v; want an error containing %q", err, tc.want)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error of %d bytes; a header's string must be cut", len(err.Error()))
			}
		})
	}
}

// slowReader serves zeros after a GGUF prefix, sleeping on every read, as
// a stalled disk or network would.
type slowReader struct {
	prefix []byte
	delay  time.Duration
	reads  atomic.Int64
}

func (s *slowReader) ReadAt(p []byte, off int64) (int, error) {
	s.reads.Add(1)
	time.Sleep(s.delay)
	n := 0
	if off < int64(len(s.prefix)) {
		n = copy(p, s.prefix[off:])
	}
	clear(p[n:])
	return len(p), nil
}

// TestReadStopsWhenCancelled: a parse of a slow source returns once its
// context ends, instead of reading on (issue #30, item 4: Ctrl-C was
// ignored). The header is one 250 MiB string served at 64 KiB every
// 10 ms, which would take 40 s.
func TestReadStopsWhenCancelled(t *testing.T) {
	r := &raw{}
	r.head(0, 1).str("k").u32(uint32(String)).u64(250 << 20)
	src := &slowReader{prefix: r.Bytes(), delay: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := ReadWith(src, 251<<20, Options{Context: ctx})
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadWith: %v; want context.Canceled", err)
	}
	if took > time.Second {
		t.Errorf("returned %v after the cancellation; want within 1 s", took)
	}
	t.Logf("stopped after %v and %d reads: %v", took, src.reads.Load(), err)
}
