package source

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/ggufattack"
)

// writeAttack writes a generated file to p with its zeros as holes.
func writeAttack(t *testing.T, p string, g *ggufattack.File) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(g.Prefix, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(g.Tail, g.TailAt); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(g.Size); err != nil {
		t.Fatal(err)
	}
}

// allocated runs f and returns the bytes it allocated, garbage included.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestSplitModelOneBudget: the 256 MiB bound was per file, so 4 local
// shards with a 200 MiB string each took 833 MB RSS and 8 took 1.65 GB
// (issue #30, item 3). One budget covers every shard of a model now: the
// second shard's string does not fit and the model is refused having
// allocated at most the bound.
func TestSplitModelOneBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 256 MiB per case")
	}
	for _, count := range []int{4, 8} {
		dir := t.TempDir()
		for i := range count {
			writeAttack(t, filepath.Join(dir, gguf.ShardName("m", i+1, count)), ggufattack.SplitShard(i, count, 200<<20))
		}
		c := plainClient(t)
		var err error
		start := time.Now()
		n := allocated(func() { _, err = c.Open(context.Background(), filepath.Join(dir, gguf.ShardName("m", 1, count))) })
		t.Logf("%d local shards of 200 MiB strings: allocated %d MiB in %v: %v", count, n>>20, time.Since(start).Round(time.Millisecond), err)
		if !errors.Is(err, gguf.ErrLimit) {
			t.Errorf("%d shards: %v; want the bound's ErrLimit", count, err)
		}
		if n > gguf.DefaultMaxAlloc+8<<20 {
			t.Errorf("%d shards: allocated %d bytes, over the %d-byte bound", count, n, gguf.DefaultMaxAlloc)
		}
	}
}

// TestSplitModelOneBudgetOverHTTP: 8 shards with 60 MiB strings each,
// served from the Hub's resolve path at a commit, took 1.24 GB and left
// 481 MB in the header cache. Now the model is refused within one bound
// and nothing is cached of a model that was not read whole.
func TestSplitModelOneBudgetOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 256 MiB")
	}
	const count = 8
	const commit = "0123456789abcdef0123456789abcdef01234567"
	files := map[string]*ggufattack.File{}
	for i := range count {
		files[gguf.ShardName("m", i+1, count)] = ggufattack.SplitShard(i, count, 60<<20)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, ok := files[path.Base(r.URL.Path)]
		if !ok || !strings.HasPrefix(r.URL.Path, "/o/r/resolve/"+commit+"/") {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(g, 0, g.Size))
	}))
	t.Cleanup(srv.Close)
	c := NewClient(func(k string) string { return map[string]string{"HF_ENDPOINT": srv.URL}[k] })
	c.CacheDir = t.TempDir()
	c.Backoff = time.Millisecond
	t.Cleanup(c.HTTP.CloseIdleConnections)
	var err error
	n := allocated(func() {
		_, err = c.Open(context.Background(), srv.URL+"/o/r/resolve/"+commit+"/"+gguf.ShardName("m", 1, count))
	})
	t.Logf("8 shards of 60 MiB strings over HTTP: allocated %d MiB: %v", n>>20, err)
	if !errors.Is(err, gguf.ErrLimit) {
		t.Errorf("%v; want the bound's ErrLimit", err)
	}
	// The hostile server's copies are this process's allocations too.
	if n > gguf.DefaultMaxAlloc+16<<20 {
		t.Errorf("allocated %d bytes, over the %d-byte bound", n, gguf.DefaultMaxAlloc)
	}
	var cached int64
	filepath.WalkDir(c.CacheDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				cached += fi.Size()
			}
		}
		return nil
	})
	if cached != 0 {
		t.Errorf("%d bytes written to the header cache for a refused model; want none", cached)
	}
}

// TestOneBudgetAcrossOpens: Opens under WithBudget share its bound, so a
// request reading a model and its companions cannot take the bound once
// for each.
func TestOneBudgetAcrossOpens(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.gguf")
	writeAttack(t, p, ggufattack.SplitShard(0, 1, 1<<20))
	c := plainClient(t)
	b := gguf.NewBudget(3 << 20)
	ctx := WithBudget(context.Background(), b)
	if _, err := c.Open(ctx, p); err != nil {
		t.Fatalf("first open within the budget: %v", err)
	}
	used := b.Used()
	if used < 1<<20 {
		t.Errorf("the first open charged %d bytes; want at least its 1 MiB string", used)
	}
	if _, err := c.Open(ctx, p); err != nil {
		t.Fatalf("second open within the budget: %v", err)
	}
	if _, err := c.Open(c.OneBudget(ctx), p); !errors.Is(err, gguf.ErrLimit) {
		t.Errorf("third open, through OneBudget: %v; want ErrLimit, the shared budget spent", err)
	}
	// A context without a budget gets a fresh one of the Client's bound.
	c.MaxParse = 3 << 20
	fresh := c.OneBudget(context.Background())
	for i := range 3 {
		_, err := c.Open(fresh, p)
		if (i < 2) != (err == nil) {
			t.Errorf("open %d under OneBudget: %v", i+1, err)
		}
	}
}
