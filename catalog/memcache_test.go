package catalog

import (
	"strconv"
	"testing"
)

// What is stored comes back as stored, and a bounded cache starts over
// instead of growing past its bound.
func TestMemoryCache(t *testing.T) {
	c := MemoryCache{Max: 8}
	if _, ok := c.Get("a"); ok {
		t.Fatal("an empty cache answered")
	}
	c.Put("a", []byte("1"))
	if b, ok := c.Get("a"); !ok || string(b) != "1" {
		t.Fatalf("got %q %v", b, ok)
	}
	for i := range c.Max + 1 {
		c.Put(strconv.Itoa(i), nil)
	}
	if c.Len() > c.Max {
		t.Errorf("%d entries kept, bound %d", c.Len(), c.Max)
	}
}
