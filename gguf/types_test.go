package gguf

import "testing"

// The expected sizes are bits per weight from ggml's own documentation of each
// block struct, so a wrong entry in the table shows up as a wrong bpw.
func TestTypeTable(t *testing.T) {
	tests := []struct {
		typ       GGMLType
		name      string
		block     uint64
		bytes     uint64
		bitsPer10 uint64 // bits per weight x 10000 / block, rounded down
	}{
		{TypeF32, "F32", 1, 4, 320000},
		{TypeF16, "F16", 1, 2, 160000},
		{TypeBF16, "BF16", 1, 2, 160000},
		{TypeQ4_0, "Q4_0", 32, 18, 45000},
		{TypeQ4_1, "Q4_1", 32, 20, 50000},
		{TypeQ5_0, "Q5_0", 32, 22, 55000},
		{TypeQ5_1, "Q5_1", 32, 24, 60000},
		{TypeQ8_0, "Q8_0", 32, 34, 85000},
		{TypeQ8_1, "Q8_1", 32, 36, 90000},
		{TypeQ2_K, "Q2_K", 256, 84, 26250},
		{TypeQ3_K, "Q3_K", 256, 110, 34375},
		{TypeQ4_K, "Q4_K", 256, 144, 45000},
		{TypeQ5_K, "Q5_K", 256, 176, 55000},
		{TypeQ6_K, "Q6_K", 256, 210, 65625},
		{TypeQ8_K, "Q8_K", 256, 292, 91250},
		{TypeIQ2_XXS, "IQ2_XXS", 256, 66, 20625},
		{TypeIQ2_XS, "IQ2_XS", 256, 74, 23125},
		{TypeIQ2_S, "IQ2_S", 256, 82, 25625},
		{TypeIQ3_XXS, "IQ3_XXS", 256, 98, 30625},
		{TypeIQ3_S, "IQ3_S", 256, 110, 34375},
		{TypeIQ1_S, "IQ1_S", 256, 50, 15625},
		{TypeIQ1_M, "IQ1_M", 256, 56, 17500},
		{TypeIQ4_NL, "IQ4_NL", 32, 18, 45000},
		{TypeIQ4_XS, "IQ4_XS", 256, 136, 42500},
		{TypeTQ1_0, "TQ1_0", 256, 54, 16875},
		{TypeTQ2_0, "TQ2_0", 256, 66, 20625},
		{TypeMXFP4, "MXFP4", 32, 17, 42500},
		{TypeNVFP4, "NVFP4", 64, 36, 45000},
		{TypeQ1_0, "Q1_0", 128, 18, 11250},
		{TypeQ2_0, "Q2_0", 64, 18, 22500},
		{TypeI8, "I8", 1, 1, 80000},
		{TypeI16, "I16", 1, 2, 160000},
		{TypeI32, "I32", 1, 4, 320000},
		{TypeI64, "I64", 1, 8, 640000},
		{TypeF64, "F64", 1, 8, 640000},
	}
	if got := len(Types()); got != len(tests) {
		t.Errorf("Types() lists %d types, the test covers %d", got, len(tests))
	}
	for _, tc := range tests {
		info, ok := tc.typ.Info()
		if !ok || info.Removed {
			t.Errorf("%s: not a loadable type", tc.name)
			continue
		}
		if info.Name != tc.name || info.BlockSize != tc.block || info.TypeSize != tc.bytes {
			t.Errorf("%d: got %s block %d bytes %d, want %s %d %d", tc.typ, info.Name, info.BlockSize, info.TypeSize, tc.name, tc.block, tc.bytes)
		}
		if bpw := tc.bytes * 8 * 10000 / tc.block; bpw != tc.bitsPer10 {
			t.Errorf("%s: %d bits per weight x1e4, want %d", tc.name, bpw, tc.bitsPer10)
		}
		if got, ok := ParseGGMLType(tc.name); !ok || got != tc.typ {
			t.Errorf("ParseGGMLType(%q) = %v, %v", tc.name, got, ok)
		}
	}
	for _, removed := range []GGMLType{4, 5, 31, 32, 33, 36, 37, 38} {
		if removed.Valid() {
			t.Errorf("type %d should be refused", removed)
		}
	}
	if GGMLType(43).Valid() || GGMLType(43).String() != "TYPE(43)" {
		t.Errorf("type 43 is unassigned")
	}
}

func TestRowSize(t *testing.T) {
	if n, ok := TypeQ4_K.RowSize(4096); !ok || n != 4096/256*144 {
		t.Errorf("Q4_K row of 4096 = %d, %v", n, ok)
	}
	if _, ok := TypeQ4_K.RowSize(100); ok {
		t.Errorf("a Q4_K row of 100 elements is not whole blocks")
	}
	if _, ok := TypeF32.RowSize(1 << 63); ok {
		t.Errorf("overflow not caught")
	}
	if n, ok := tensorBytes(TypeQ6_K, []uint64{8192, 128256}); !ok || n != 8192/256*210*128256 {
		t.Errorf("tensorBytes = %d", n)
	}
}
