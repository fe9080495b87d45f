package catalog

import "sync"

// MemoryCache is a Cache in memory, for a process that recommends many
// times (a server): outcomes are kept for its life, up to a bound past
// which it starts over rather than grow.
type MemoryCache struct {
	mu sync.Mutex
	m  map[string][]byte
	// Max is how many entries it keeps before starting over; 0 is no
	// bound.
	Max int
}

// Get returns what Put stored under key.
func (c *MemoryCache) Get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[key]
	return b, ok
}

// Put stores data under key.
func (c *MemoryCache) Put(key string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.Max > 0 && len(c.m) >= c.Max {
		c.m = map[string][]byte{}
	}
	c.m[key] = data
}

// Len is how many entries it holds.
func (c *MemoryCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
