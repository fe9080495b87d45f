package httpretry

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Sleep waits d, or until ctx is done, when it returns ctx's cause.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// ParseContentRange parses a Content-Range header, "bytes FIRST-LAST/SIZE"
// (a resumed or ranged answer) or "bytes */SIZE" (a 416's): last is -1 for
// the latter, and size is -1 where the server gave it as "*". It checks
// the syntax only; whether the range lies inside the size is the caller's
// rule.
func ParseContentRange(v string) (first, last, size int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(v), "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	span, total, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	size = -1
	if total != "*" {
		n, err := strconv.ParseInt(total, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, 0, false
		}
		size = n
	}
	if span == "*" {
		return 0, -1, size, size >= 0
	}
	a, b, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, 0, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if err := errors.Join(err1, err2); err != nil || first < 0 || last < first {
		return 0, 0, 0, false
	}
	return first, last, size, true
}
