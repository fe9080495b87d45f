package cli

import "testing"

func TestDecimalUnits(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{bytesSI(0), "0 B"},
		{bytesSI(999), "999 B"},
		{bytesSI(1000), "1.00 kB"},
		{bytesSI(4_920_000_000), "4.92 GB"},
		{bytesSI(2_500_000_000_000), "2.50 TB"},
		{count(12), "12"},
		{count(494_030_000), "494.03 M"},
		{count(70_550_000_000), "70.55 B"},
		{count(1_200_000_000_000), "1.20 T"},
		{count(1500), "1.50 K"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
