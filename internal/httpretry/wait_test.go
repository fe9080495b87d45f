package httpretry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestParseContentRange(t *testing.T) {
	for _, c := range []struct {
		in                string
		first, last, size int64
		ok                bool
	}{
		{"bytes 0-99/1000", 0, 99, 1000, true},
		{" bytes 100-199/* ", 100, 199, -1, true},
		{"bytes */1000", 0, -1, 1000, true},
		{"bytes */*", 0, 0, 0, false},
		{"bytes 5-3/10", 0, 0, 0, false},
		{"bytes -1-3/10", 0, 0, 0, false},
		{"bytes 0-9/-1", 0, 0, 0, false},
		{"bytes 0-9", 0, 0, 0, false},
		{"bytes 09/10", 0, 0, 0, false},
		{"items 0-9/10", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		first, last, size, ok := ParseContentRange(c.in)
		if ok != c.ok || (ok && (first != c.first || last != c.last || size != c.size)) {
			t.Errorf("ParseContentRange(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", c.in, first, last, size, ok, c.first, c.last, c.size, c.ok)
		}
	}
}

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/1000", "bytes */5", "bytes 1-0/*", "bytes 9223372036854775807-9223372036854775807/*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		first, last, size, ok := ParseContentRange(v)
		if !ok {
			return
		}
		if last == -1 {
			if first != 0 || size < 0 {
				t.Fatalf("%q: unsatisfied form with first %d, size %d", v, first, size)
			}
			return
		}
		if first < 0 || last < first || size < -1 {
			t.Fatalf("%q: accepted %d-%d/%d", v, first, last, size)
		}
	})
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("a short sleep failed: %v", err)
	}
	cause := errors.New("stop")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if err := Sleep(ctx, time.Hour); !errors.Is(err, cause) {
		t.Fatalf("a cancelled sleep returned %v, want its cause", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a zero sleep on a done context returned %v, want context.Canceled", err)
	}
}
