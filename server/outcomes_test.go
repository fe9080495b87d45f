package server

import (
	"strconv"
	"testing"
)

// The plans kept between requests come back as stored, and the store
// starts over instead of growing past its bound.
func TestOutcomes(t *testing.T) {
	var o outcomes
	if _, ok := o.Get("a"); ok {
		t.Fatal("an empty store answered")
	}
	o.Put("a", []byte("1"))
	if b, ok := o.Get("a"); !ok || string(b) != "1" {
		t.Fatalf("got %q %v", b, ok)
	}
	for i := range maxOutcomes + 1 {
		o.Put(strconv.Itoa(i), nil)
	}
	if len(o.m) > maxOutcomes {
		t.Errorf("%d plans kept, bound %d", len(o.m), maxOutcomes)
	}
}
