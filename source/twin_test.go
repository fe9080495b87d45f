package source

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// A twin holds each shard's header byte for byte and has the shard's
// size, under the shard's own name; it parses as the original does. It
// is written from the header cache when the header is there, and with
// range requests when not.
func TestWriteTwin(t *testing.T) {
	h := newFakeHub(t)
	shards := ggufShards(t, 3)
	var files []fakeFile
	for i, s := range shards {
		files = append(files, fakeFile{gguf.ShardName("Q4_K_M/Big-Q4_K_M", i+1, 3), s})
	}
	h.addRepo("acme/Big-GGUF", false, files...)
	ctx := context.Background()
	for _, cached := range []bool{true, false} {
		c := h.client("")
		if !cached {
			c.CacheDir = ""
		}
		hd, err := c.Open(ctx, "hf:acme/Big-GGUF:q4_k_m")
		if err != nil {
			t.Fatal(err)
		}
		_, _, before := h.counts()
		dir := t.TempDir()
		paths, err := c.WriteTwin(ctx, hd, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, _, after := h.counts()
		if cached && after != before {
			t.Errorf("cached headers: %d range requests for the twin", after-before)
		}
		if len(paths) != 3 {
			t.Fatalf("twins %q", paths)
		}
		for i, p := range paths {
			if filepath.Base(p) != filepath.Base(files[i].path) {
				t.Errorf("twin %s for %s", p, files[i].path)
			}
			twin, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			orig := shards[i]
			f, err := gguf.Read(bytes.NewReader(orig), int64(len(orig)))
			if err != nil {
				t.Fatal(err)
			}
			if len(twin) != len(orig) || !bytes.Equal(twin[:f.DataOffset], orig[:f.DataOffset]) {
				t.Errorf("twin %d: %d bytes, header equal %v; want %d bytes", i, len(twin), bytes.Equal(twin[:min(len(twin), int(f.DataOffset))], orig[:f.DataOffset]), len(orig))
			}
		}
	}
	// A local model is its own twin.
	local := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(local, ggufFile(t, 0, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	c := h.client("")
	hd, err := c.Open(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	if paths, err := c.WriteTwin(ctx, hd, t.TempDir()); err != nil || len(paths) != 1 || paths[0] != local {
		t.Errorf("local: %q %v", paths, err)
	}
}
