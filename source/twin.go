package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/headroom-llm/headroom/gguf"
)

// WriteTwin writes a header-only sparse twin of the model's files into
// dir, for a program that reads headers and never weights (llama.cpp's
// no-alloc projection): each file's exact header bytes, then a hole up to
// its real size, under its own base name so that llama.cpp finds the
// shards of a split model by their names. The bytes come from the header
// cache, else from range requests as when the header was read. A local
// model needs no twin: its own paths are returned. The caller removes
// dir.
func (c *Client) WriteTwin(ctx context.Context, h *Header, dir string) ([]string, error) {
	if h == nil || h.Artifact == nil || len(h.Artifact.Files) == 0 {
		return nil, errors.New("twin: no model files")
	}
	a := h.Artifact
	if a.Files[0].Path != "" {
		var paths []string
		for _, f := range a.Files {
			paths = append(paths, f.Path)
		}
		return paths, nil
	}
	o, err := c.newOp()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range a.Files {
		header, size, err := o.headerPrefix(ctx, a, f)
		if err != nil {
			return nil, fmt.Errorf("twin of %s: %w", f.Name, err)
		}
		p := filepath.Join(dir, filepath.Base(f.Name))
		if err := writeSparse(p, header, size); err != nil {
			return nil, fmt.Errorf("twin of %s: %w", f.Name, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// headerPrefix is a remote file's bytes up to its tensor data, and its
// size.
func (o *op) headerPrefix(ctx context.Context, a *Artifact, f ArtifactFile) ([]byte, int64, error) {
	hc := o.cache()
	if a.Repo != "" && a.Commit != "" && hc.enabled() {
		if parsed, header, err := hc.loadEntry(ctx, cacheKey{repo: a.Repo, commit: a.Commit, file: f.Name}, nil); err == nil {
			return header, parsed.Size, nil
		}
	}
	if f.URL == "" {
		return nil, 0, errors.New("no URL to read the header from, and it is not cached")
	}
	rr, err := o.openRange(ctx, f.URL, a.Repo, a.Kind == KindHF)
	if err != nil {
		return nil, 0, err
	}
	defer rr.Close()
	budget := gguf.NewBudget(o.c.parseBudget())
	rr.budget = budget
	parsed, err := gguf.ReadWith(rr, rr.Size(), gguf.Options{Budget: budget})
	if err != nil {
		return nil, 0, fmt.Errorf("reading the GGUF header: %w", err)
	}
	header := rr.prefix(parsed.DataOffset)
	if int64(len(header)) > parsed.DataOffset {
		return nil, 0, fmt.Errorf("expected at most %d header bytes, found %d", parsed.DataOffset, len(header))
	}
	return header, parsed.Size, nil
}

// writeSparse writes header at the start of a new file of size bytes;
// the rest is a hole (zeros, no disk space on file systems with holes).
func writeSparse(path string, header []byte, size int64) (err error) {
	if int64(len(header)) > size {
		return fmt.Errorf("a %d-byte header does not fit a %d-byte file", len(header), size)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := f.Write(header); err != nil {
		return err
	}
	return f.Truncate(size)
}
