package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ValueType is the type tag of a GGUF metadata value (enum gguf_type).
type ValueType uint32

// The GGUF metadata value types.
const (
	Uint8   ValueType = 0
	Int8    ValueType = 1
	Uint16  ValueType = 2
	Int16   ValueType = 3
	Uint32  ValueType = 4
	Int32   ValueType = 5
	Float32 ValueType = 6
	Bool    ValueType = 7
	String  ValueType = 8
	Array   ValueType = 9
	Uint64  ValueType = 10
	Int64   ValueType = 11
	Float64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32",
	"float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// fixedSize is the encoded size of a scalar type, 0 for string and array,
// and -1 for unknown tags.
func (t ValueType) fixedSize() int {
	switch t {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	case String, Array:
		return 0
	}
	return -1
}

func (t ValueType) signed() bool { return t == Int8 || t == Int16 || t == Int32 || t == Int64 }

// Value is one GGUF metadata value. Scalars keep their raw little-endian
// bits; arrays keep their elements packed, so a 150,000-token vocabulary
// costs two allocations rather than 150,000.
type Value struct {
	typ  ValueType
	bits uint64
	str  string
	arr  *ArrayValue
}

// ArrayValue is a GGUF array: a homogeneous sequence of one value type.
type ArrayValue struct {
	elem ValueType
	n    int
	raw  []byte   // fixed-size elements, little-endian, packed
	blob []byte   // string elements, concatenated
	ends []uint32 // string i is blob[ends[i-1]:ends[i]]
	sub  []Value  // nested arrays
}

// Type returns the value's GGUF type tag.
func (v Value) Type() ValueType { return v.typ }

// Uint8Value and the other constructors build metadata values for the writer.
func Uint8Value(x uint8) Value     { return Value{typ: Uint8, bits: uint64(x)} }
func Int8Value(x int8) Value       { return Value{typ: Int8, bits: uint64(int64(x))} }
func Uint16Value(x uint16) Value   { return Value{typ: Uint16, bits: uint64(x)} }
func Int16Value(x int16) Value     { return Value{typ: Int16, bits: uint64(int64(x))} }
func Uint32Value(x uint32) Value   { return Value{typ: Uint32, bits: uint64(x)} }
func Int32Value(x int32) Value     { return Value{typ: Int32, bits: uint64(int64(x))} }
func Uint64Value(x uint64) Value   { return Value{typ: Uint64, bits: x} }
func Int64Value(x int64) Value     { return Value{typ: Int64, bits: uint64(x)} }
func Float32Value(x float32) Value { return Value{typ: Float32, bits: uint64(math.Float32bits(x))} }
func Float64Value(x float64) Value { return Value{typ: Float64, bits: math.Float64bits(x)} }
func StringValue(s string) Value   { return Value{typ: String, str: s} }
func BoolValue(b bool) Value {
	if b {
		return Value{typ: Bool, bits: 1}
	}
	return Value{typ: Bool}
}

// StringsValue builds an array of strings.
func StringsValue(ss []string) Value {
	a := &ArrayValue{elem: String, n: len(ss), ends: make([]uint32, len(ss))}
	for i, s := range ss {
		a.blob = append(a.blob, s...)
		a.ends[i] = uint32(len(a.blob))
	}
	return Value{typ: Array, arr: a}
}

// EmptyStringsValue builds an array of n empty strings: a vocabulary's
// size without its text, as planner inputs keep it. It costs four bytes an
// element where StringsValue(make([]string, n)) costs twenty, most of them
// pointers the collector must scan.
func EmptyStringsValue(n int) Value {
	return Value{typ: Array, arr: &ArrayValue{elem: String, n: n, ends: make([]uint32, n)}}
}

// Int32sValue builds an array of int32.
func Int32sValue(xs []int32) Value {
	a := &ArrayValue{elem: Int32, n: len(xs), raw: make([]byte, 4*len(xs))}
	for i, x := range xs {
		binary.LittleEndian.PutUint32(a.raw[4*i:], uint32(x))
	}
	return Value{typ: Array, arr: a}
}

// Float32sValue builds an array of float32.
func Float32sValue(xs []float32) Value {
	a := &ArrayValue{elem: Float32, n: len(xs), raw: make([]byte, 4*len(xs))}
	for i, x := range xs {
		binary.LittleEndian.PutUint32(a.raw[4*i:], math.Float32bits(x))
	}
	return Value{typ: Array, arr: a}
}

// BoolsValue builds an array of bools.
func BoolsValue(xs []bool) Value {
	a := &ArrayValue{elem: Bool, n: len(xs), raw: make([]byte, len(xs))}
	for i, x := range xs {
		if x {
			a.raw[i] = 1
		}
	}
	return Value{typ: Array, arr: a}
}

// ArrayOf builds an array from values that must all have type elem; it is
// how nested arrays and arrays of the less common scalar types are made.
func ArrayOf(elem ValueType, items ...Value) (Value, error) {
	a := &ArrayValue{elem: elem, n: len(items)}
	size := elem.fixedSize()
	for i, it := range items {
		if it.typ != elem {
			return Value{}, fmt.Errorf("gguf: array of %s: element %d is a %s", elem, i, it.typ)
		}
		switch {
		case elem == String:
			a.blob = append(a.blob, it.str...)
			a.ends = append(a.ends, uint32(len(a.blob)))
		case elem == Array:
			a.sub = append(a.sub, it)
		case size > 0:
			var buf [8]byte
			binary.LittleEndian.PutUint64(buf[:], it.bits)
			a.raw = append(a.raw, buf[:size]...)
		default:
			return Value{}, fmt.Errorf("gguf: array of unknown element type %d", uint32(elem))
		}
	}
	return Value{typ: Array, arr: a}, nil
}

// AsUint returns an integer value as uint64. ok is false for non-integers and
// negative numbers.
func (v Value) AsUint() (uint64, bool) {
	switch v.typ {
	case Uint8, Uint16, Uint32, Uint64:
		return v.bits, true
	case Int8, Int16, Int32, Int64:
		if int64(v.bits) < 0 {
			return 0, false
		}
		return v.bits, true
	}
	return 0, false
}

// AsInt returns an integer value as int64. ok is false for non-integers and
// for uint64 values above math.MaxInt64.
func (v Value) AsInt() (int64, bool) {
	switch v.typ {
	case Int8, Int16, Int32, Int64:
		return int64(v.bits), true
	case Uint8, Uint16, Uint32, Uint64:
		if v.bits > math.MaxInt64 {
			return 0, false
		}
		return int64(v.bits), true
	}
	return 0, false
}

// AsFloat returns a numeric value (float or integer) as float64.
func (v Value) AsFloat() (float64, bool) {
	switch v.typ {
	case Float32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case Float64:
		return math.Float64frombits(v.bits), true
	}
	if i, ok := v.AsInt(); ok {
		return float64(i), true
	}
	if u, ok := v.AsUint(); ok {
		return float64(u), true
	}
	return 0, false
}

// AsBool returns a bool value.
func (v Value) AsBool() (bool, bool) {
	if v.typ != Bool {
		return false, false
	}
	return v.bits != 0, true
}

// AsString returns a string value.
func (v Value) AsString() (string, bool) {
	if v.typ != String {
		return "", false
	}
	return v.str, true
}

// AsArray returns an array value.
func (v Value) AsArray() (*ArrayValue, bool) {
	if v.typ != Array || v.arr == nil {
		return nil, false
	}
	return v.arr, true
}

// Len is the number of elements.
func (a *ArrayValue) Len() int { return a.n }

// Elem is the element type.
func (a *ArrayValue) Elem() ValueType { return a.elem }

// Index returns element i as a Value. It panics if i is out of range, like a
// slice index.
func (a *ArrayValue) Index(i int) Value {
	if i < 0 || i >= a.n {
		panic(fmt.Sprintf("gguf: array index %d out of range [0,%d)", i, a.n))
	}
	switch a.elem {
	case String:
		start := uint32(0)
		if i > 0 {
			start = a.ends[i-1]
		}
		return Value{typ: String, str: string(a.blob[start:a.ends[i]])}
	case Array:
		return a.sub[i]
	}
	size := a.elem.fixedSize()
	var buf [8]byte
	copy(buf[:], a.raw[i*size:(i+1)*size])
	bits := binary.LittleEndian.Uint64(buf[:])
	if a.elem.signed() { // sign-extend so AsInt sees the stored number
		shift := 64 - 8*uint(size)
		bits = uint64(int64(bits<<shift) >> shift)
	}
	return Value{typ: a.elem, bits: bits}
}

// Strings returns the elements of an array of strings; ok is false for any
// other element type.
func (a *ArrayValue) Strings() ([]string, bool) {
	if a.elem != String {
		return nil, false
	}
	out := make([]string, a.n)
	for i := range out {
		out[i], _ = a.Index(i).AsString()
	}
	return out, true
}

// Ints returns the elements of an integer array as int64; ok is false when
// the elements are not integers or one does not fit int64.
func (a *ArrayValue) Ints() ([]int64, bool) {
	if a.elem.fixedSize() <= 0 || a.elem == Float32 || a.elem == Float64 || a.elem == Bool {
		return nil, false
	}
	out := make([]int64, a.n)
	for i := range out {
		x, ok := a.Index(i).AsInt()
		if !ok {
			return nil, false
		}
		out[i] = x
	}
	return out, true
}

// Floats returns the elements of a numeric array as float64.
func (a *ArrayValue) Floats() ([]float64, bool) {
	if a.elem.fixedSize() <= 0 || a.elem == Bool {
		return nil, false
	}
	out := make([]float64, a.n)
	for i := range out {
		out[i], _ = a.Index(i).AsFloat()
	}
	return out, true
}

// Bools returns the elements of an array of bools.
func (a *ArrayValue) Bools() ([]bool, bool) {
	if a.elem != Bool {
		return nil, false
	}
	out := make([]bool, a.n)
	for i := range out {
		out[i] = a.raw[i] != 0
	}
	return out, true
}

// String formats the value for people: strings quoted, arrays abbreviated
// after a few elements with their length.
func (v Value) String() string {
	switch v.typ {
	case String:
		return strconv.Quote(v.str)
	case Bool:
		return strconv.FormatBool(v.bits != 0)
	case Float32:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(v.bits))), 'g', -1, 32)
	case Float64:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64)
	case Int8, Int16, Int32, Int64:
		return strconv.FormatInt(int64(v.bits), 10)
	case Uint8, Uint16, Uint32, Uint64:
		return strconv.FormatUint(v.bits, 10)
	case Array:
		if v.arr == nil {
			return "[]"
		}
		var b strings.Builder
		b.WriteString("[")
		const show = 6
		for i := 0; i < v.arr.n && i < show; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v.arr.Index(i).String())
		}
		if v.arr.n > show {
			fmt.Fprintf(&b, ", ... (%d %s)", v.arr.n, v.arr.elem)
		}
		b.WriteString("]")
		return b.String()
	}
	return fmt.Sprintf("<%s>", v.typ)
}

// JSON returns the value as plain Go data for encoding/json: numbers, bool,
// string, or a slice. Arrays longer than maxArray are cut to their first
// maxArray elements (maxArray < 0 keeps all).
func (v Value) JSON(maxArray int) any {
	out, _ := v.JSONCut(maxArray, -1)
	return out
}

// JSONCut is JSON with strings longer than maxString bytes cut too, at a
// character boundary and marked with how long they were; cut reports
// whether any array or string was shortened. A negative maxString keeps
// strings whole. A header may hold a 250 MiB string, which printed whole
// (and escaped) would take gigabytes.
func (v Value) JSONCut(maxArray, maxString int) (out any, cut bool) {
	switch v.typ {
	case String:
		return cutString(v.str, maxString)
	case Array:
		if v.arr == nil {
			return []any{}, false
		}
		n := v.arr.n
		if maxArray >= 0 && n > maxArray {
			n, cut = maxArray, true
		}
		list := make([]any, n)
		for i := range list {
			var c bool
			list[i], c = v.arr.Index(i).JSONCut(maxArray, maxString)
			cut = cut || c
		}
		return list, cut
	}
	return v.scalarJSON(), false
}

// cutString shortens s to at most max bytes of whole characters, and says
// so in what it returns.
func cutString(s string, max int) (string, bool) {
	if max < 0 || len(s) <= max {
		return s, false
	}
	k := max
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return s[:k] + fmt.Sprintf("… [cut: %d bytes in all]", len(s)), true
}

// scalarJSON is the JSON of a value that is neither a string nor an array.
func (v Value) scalarJSON() any {
	switch v.typ {
	case String:
		return v.str
	case Bool:
		return v.bits != 0
	case Float32, Float64:
		f, _ := v.AsFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64) // JSON has no NaN
		}
		if v.typ == Float32 {
			// The shortest decimal that reads back as the same float32, so
			// 1e-5 prints as 1e-05 rather than 9.999999747378752e-06.
			f, _ = strconv.ParseFloat(v.String(), 64)
		}
		return f
	case Int8, Int16, Int32, Int64:
		return int64(v.bits)
	case Uint8, Uint16, Uint32, Uint64:
		return v.bits
	}
	return nil
}
