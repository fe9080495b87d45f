package units

import "testing"

func TestUnits(t *testing.T) {
	for _, tc := range []struct {
		n         int64
		gib, size string
	}{
		{0, "0.00 GiB", "0 MiB"},
		{300 << 20, "0.29 GiB", "300 MiB"},
		{1<<30 - 1, "1.00 GiB", "1023 MiB"},
		{1 << 30, "1.00 GiB", "1.00 GiB"},
		{15 << 29, "7.50 GiB", "7.50 GiB"},
	} {
		if got := GiB(tc.n); got != tc.gib {
			t.Errorf("GiB(%d) = %q, want %q", tc.n, got, tc.gib)
		}
		if got := Size(tc.n); got != tc.size {
			t.Errorf("Size(%d) = %q, want %q", tc.n, got, tc.size)
		}
	}
}
