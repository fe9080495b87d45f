package gguf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// FuzzRead feeds arbitrary bytes to the reader. It must never panic, and when
// it accepts a header, what it returns must be self-consistent: every tensor
// inside the file, and the metadata must survive a write and a second read.
func FuzzRead(f *testing.F) {
	good, err := sample(f).Bytes()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(new(raw).head(1, 0).tensor("w", TypeQ4_K, 0, 256, 2).padded(288))
	f.Add(new(raw).head(0, 1).str("general.alignment").u32(uint32(Uint32)).u32(64).padded(64))
	f.Add(deepArray(3))
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		budget := NewBudget(16 << 20)
		file, err := ReadWith(bytes.NewReader(data), int64(len(data)), Options{Budget: budget})
		if budget.Used() > budget.Limit() {
			t.Fatalf("charged %d bytes against a bound of %d", budget.Used(), budget.Limit())
		}
		if err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if file.DataOffset < 0 || file.DataOffset%int64(file.Alignment) != 0 {
			t.Fatalf("data offset %d", file.DataOffset)
		}
		for _, tn := range file.Tensors {
			if file.DataOffset+int64(tn.Offset)+int64(tn.Size) > int64(len(data)) {
				t.Fatalf("tensor %q outside the file", tn.Name)
			}
		}
		b := NewBuilder()
		b.Version = file.Version
		for _, kv := range file.Metadata {
			_ = kv.Value.String()
			// The JSON inspect prints: valid, and cut to its limits
			// however long the values.
			v, _ := kv.Value.JSONCut(4, 16)
			out, err := json.Marshal(v)
			if err != nil || !json.Valid(out) {
				t.Fatalf("JSON of %q: %v", kv.Key, err)
			}
			if err := withinCut(v, 4, 16); err != nil {
				t.Fatalf("JSON of %q: %v", kv.Key, err)
			}
			b.Set(kv.Key, kv.Value)
		}
		// Only the header: an accepted alignment may be as large as 2^31,
		// and padding to it would test memory, not the reader.
		var buf bytes.Buffer
		if err := b.writeHeader(&buf, file.Alignment); err != nil {
			t.Fatalf("cannot re-encode accepted metadata: %v", err)
		}
		again := buf.Bytes()
		back, err := Read(bytes.NewReader(again), int64(len(again)))
		if err != nil {
			t.Fatalf("re-encoded header refused: %v", err)
		}
		if len(back.Metadata) != len(file.Metadata) {
			t.Fatalf("metadata count changed %d -> %d", len(file.Metadata), len(back.Metadata))
		}
		for i, kv := range file.Metadata {
			if back.Metadata[i].Key != kv.Key || back.Metadata[i].Value.String() != kv.Value.String() {
				t.Fatalf("metadata %q changed on re-encode", kv.Key)
			}
		}
	})
}

// withinCut checks that a value from JSONCut(maxArray, maxString) has no
// longer array, and no longer string than the cut with its marker.
func withinCut(v any, maxArray, maxString int) error {
	const marker = len("… [cut: 18446744073709551615 bytes in all]")
	switch x := v.(type) {
	case string:
		if len(x) > maxString+marker {
			return fmt.Errorf("a string of %d bytes, over the cut of %d", len(x), maxString)
		}
	case []any:
		if len(x) > maxArray {
			return fmt.Errorf("an array of %d elements, over the cut of %d", len(x), maxArray)
		}
		for _, e := range x {
			if err := withinCut(e, maxArray, maxString); err != nil {
				return err
			}
		}
	}
	return nil
}
