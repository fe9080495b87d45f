package plan

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseTensorSplit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []float64
	}{
		{"3,1", []float64{3, 1}},
		{" 47 , 20 ", []float64{47, 20}},
		{"0.5", []float64{0.5}},
		{"", nil},
		{"3,", nil},
		{"-1,2", nil},
		{"1,NaN", nil},
		{"Inf", nil},
		{strings.Repeat("1,", 64) + "1", nil},
	} {
		got, err := ParseTensorSplit(c.in)
		if (err == nil) != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("ParseTensorSplit(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func FuzzParseTensorSplit(f *testing.F) {
	for _, s := range []string{"3,1", "47,20", "", "-1", "1e308,1e308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		split, err := ParseTensorSplit(s)
		if err != nil {
			return
		}
		if len(split) == 0 || len(split) > maxSplitDevices {
			t.Fatalf("%q: %d shares accepted", s, len(split))
		}
		for _, x := range split {
			if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%q: share %v accepted", s, x)
			}
		}
	})
}
