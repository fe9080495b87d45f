package server

import "sync"

// outcomes keeps the catalog's per-variant plans for the life of the
// server (catalog.Cache): a plan depends only on the machine and the
// search options, which are in its key, so a panel that reloads, or two
// pages asking at once, plan each variant once instead of every time.
type outcomes struct {
	mu sync.Mutex
	m  map[string][]byte
}

// maxOutcomes bounds the memory: a few machines' worth of catalog plans.
const maxOutcomes = 4096

func (o *outcomes) Get(key string) ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.m[key]
	return b, ok
}

func (o *outcomes) Put(key string, data []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || len(o.m) >= maxOutcomes {
		o.m = map[string][]byte{} // start over rather than grow without bound
	}
	o.m[key] = data
}
