package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// sample builds a small model with every value type, a nested array and
// tensors of several types, some with data and some holes.
func sample(t testing.TB) *Builder {
	t.Helper()
	b := NewBuilder()
	b.Set("general.architecture", StringValue("llama"))
	b.Set("general.name", StringValue("tiny ✓"))
	b.Set("u8", Uint8Value(200))
	b.Set("i8", Int8Value(-100))
	b.Set("u16", Uint16Value(60000))
	b.Set("i16", Int16Value(-30000))
	b.Set("u32", Uint32Value(4000000000))
	b.Set("i32", Int32Value(-2000000000))
	b.Set("u64", Uint64Value(1<<63+5))
	b.Set("i64", Int64Value(-1<<62))
	b.Set("f32", Float32Value(0.5))
	b.Set("f64", Float64Value(-1e300))
	b.Set("yes", BoolValue(true))
	b.Set("empty", StringValue(""))
	b.Set("tokens", StringsValue([]string{"<s>", "", "héllo", "\x00"}))
	b.Set("heads", Int32sValue([]int32{8, 0, -1, 8}))
	b.Set("scores", Float32sValue([]float32{0, -1.5}))
	b.Set("swa", BoolsValue([]bool{true, false, true}))
	inner1, _ := ArrayOf(Uint16, Uint16Value(1), Uint16Value(2))
	inner2, _ := ArrayOf(String, StringValue("a"))
	nested, err := ArrayOf(Array, inner1, inner2)
	if err != nil {
		t.Fatal(err)
	}
	b.Set("nested", nested)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.AddTensor("token_embd.weight", TypeQ4_K, []uint64{256, 10}, nil))
	must(b.AddTensor("blk.0.attn_norm.weight", TypeF32, []uint64{256}, bytes.Repeat([]byte{7}, 1024)))
	must(b.AddTensor("blk.0.ffn_up.weight", TypeIQ2_XXS, []uint64{512, 3, 1}, nil))
	must(b.AddTensor("output.weight", TypeMXFP4, []uint64{64, 10}, nil))
	must(b.AddTensor("empty.weight", TypeF16, []uint64{0, 4}, nil))
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		b := sample(t)
		b.Version = version
		data, err := b.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		want, err := b.Layout()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if got.Version != version || got.DataOffset != want.DataOffset || got.Size != want.Size || got.Alignment != 32 {
			t.Errorf("v%d: header %d/%d/%d, want %d/%d", version, got.Version, got.DataOffset, got.Size, want.DataOffset, want.Size)
		}
		if got.DataOffset%32 != 0 || int64(len(data)) != got.Size {
			t.Errorf("data offset %d not aligned or size %d != %d", got.DataOffset, len(data), got.Size)
		}
		if !reflect.DeepEqual(got.Tensors, want.Tensors) {
			t.Errorf("tensors differ:\n got %+v\nwant %+v", got.Tensors, want.Tensors)
		}
		if len(got.Metadata) != len(want.Metadata) {
			t.Fatalf("metadata count %d, want %d", len(got.Metadata), len(want.Metadata))
		}
		for i, kv := range want.Metadata {
			g := got.Metadata[i]
			if g.Key != kv.Key || g.Value.Type() != kv.Value.Type() || g.Value.String() != kv.Value.String() {
				t.Errorf("metadata %d: got %s=%v (%s), want %s=%v (%s)", i, g.Key, g.Value, g.Value.Type(), kv.Key, kv.Value, kv.Value.Type())
			}
		}
		// The tensor with data must come back byte for byte.
		norm := got.Tensors[1]
		start := got.DataOffset + int64(norm.Offset)
		if !bytes.Equal(data[start:start+int64(norm.Size)], bytes.Repeat([]byte{7}, 1024)) {
			t.Errorf("tensor data not where the header says")
		}
	}
}

func TestAccessors(t *testing.T) {
	data, err := sample(t).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Architecture() != "llama" {
		t.Errorf("architecture %q", f.Architecture())
	}
	if v, ok := f.Uint("u64"); !ok || v != 1<<63+5 {
		t.Errorf("u64 = %d %v", v, ok)
	}
	if _, ok := f.Uint("i8"); ok {
		t.Errorf("negative i8 read as uint")
	}
	if v, _ := f.Lookup("i8"); v.String() != "-100" {
		t.Errorf("i8 = %v", v)
	}
	if x, ok := f.Float("f32"); !ok || x != 0.5 {
		t.Errorf("f32 = %v", x)
	}
	v, _ := f.Lookup("heads")
	arr, _ := v.AsArray()
	ints, ok := arr.Ints()
	if !ok || !reflect.DeepEqual(ints, []int64{8, 0, -1, 8}) {
		t.Errorf("heads = %v %v", ints, ok)
	}
	v, _ = f.Lookup("tokens")
	arr, _ = v.AsArray()
	strs, _ := arr.Strings()
	if !reflect.DeepEqual(strs, []string{"<s>", "", "héllo", "\x00"}) {
		t.Errorf("tokens = %q", strs)
	}
	v, _ = f.Lookup("swa")
	arr, _ = v.AsArray()
	if bs, _ := arr.Bools(); !reflect.DeepEqual(bs, []bool{true, false, true}) {
		t.Errorf("swa = %v", bs)
	}
	v, _ = f.Lookup("nested")
	if v.String() != `[[1, 2], ["a"]]` {
		t.Errorf("nested = %s", v)
	}
	if got := v.JSON(-1); !reflect.DeepEqual(got, []any{[]any{uint64(1), uint64(2)}, []any{"a"}}) {
		t.Errorf("nested JSON = %#v", got)
	}
	if f.Tensors[2].Elements() != 1536 || f.Tensors[2].Size != 1536/256*66 {
		t.Errorf("IQ2_XXS tensor: %d elements, %d bytes", f.Tensors[2].Elements(), f.Tensors[2].Size)
	}
}

func TestSparseWriteFile(t *testing.T) {
	b := NewBuilder()
	b.Set("general.architecture", StringValue("llama"))
	// 8 GiB of declared weights.
	for i := range 8 {
		if err := b.AddTensor(filepathName(i), TypeF16, []uint64{16384, 32768}, nil); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "big.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	if st.Size() < 8<<30 {
		t.Fatalf("file is %d bytes, want at least 8 GiB", st.Size())
	}
	if used := diskUsage(st); used >= 0 && used > 16<<20 {
		t.Errorf("sparse file uses %d bytes of disk", used)
	}
	f, err := Read(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 8 || f.Size != st.Size() {
		t.Errorf("read back %d tensors, size %d", len(f.Tensors), f.Size)
	}
}

func filepathName(i int) string { return "blk." + string(rune('0'+i)) + ".ffn_up.weight" }

func TestBuilderRefuses(t *testing.T) {
	b := NewBuilder()
	cases := []struct {
		name  string
		typ   GGMLType
		shape []uint64
		data  []byte
	}{
		{"", TypeF32, []uint64{1}, nil},
		{"x", TypeF32, nil, nil},
		{"x", TypeF32, []uint64{1, 1, 1, 1, 1}, nil},
		{"x", GGMLType(31), []uint64{32}, nil},
		{"x", TypeQ4_K, []uint64{100}, nil},
		{"x", TypeF32, []uint64{4}, []byte{1}},
	}
	for _, c := range cases {
		if err := b.AddTensor(c.name, c.typ, c.shape, c.data); err == nil {
			t.Errorf("AddTensor(%q, %v, %v) accepted", c.name, c.typ, c.shape)
		}
	}
	if err := b.AddTensor("a", TypeF32, []uint64{1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.AddTensor("a", TypeF32, []uint64{1}, nil); err == nil {
		t.Errorf("duplicate tensor accepted")
	}
	b.Set("general.alignment", Uint64Value(64))
	if _, err := b.Bytes(); err == nil {
		t.Errorf("uint64 alignment accepted")
	}
	b.Set("general.alignment", Uint32Value(64))
	f, err := b.Layout()
	if err != nil || f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("alignment 64: %v %+v", err, f)
	}
}
