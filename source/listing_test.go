package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/atomicfile"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const listingCommit = "0123456789abcdef0123456789abcdef01234567"

// tinyEntries is a Hub answer listing n files in as few bytes as JSON
// allows, the shape of the 2.75M-entry listing just under 64 MiB.
func tinyEntries(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"sha":"` + listingCommit + `","siblings":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"rfilename":"%x"}`, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// TestListingEntriesAreBounded: a listing just under the 64 MiB limit
// with 2.75M tiny entries took 805 MB (issue #30, item 3). Entries are
// decoded one at a time and a listing past 100,000 is refused, having
// allocated a few MiB.
func TestListingEntriesAreBounded(t *testing.T) {
	body := tinyEntries(2_750_000)
	if len(body) > maxListing {
		t.Fatalf("the listing is %d bytes, over the %d limit it must stay under", len(body), maxListing)
	}
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(hub.Close)
	c := NewClient(func(k string) string { return map[string]string{"HF_ENDPOINT": hub.URL}[k] })
	c.CacheDir = t.TempDir()
	t.Cleanup(c.HTTP.CloseIdleConnections)
	var err error
	n := allocated(func() { _, err = c.Open(context.Background(), "hf:owner/repo:Q4_K_M") })
	t.Logf("%d-byte listing of 2.75M entries: allocated %d MiB: %v", len(body), n>>20, err)
	if !errors.Is(err, errListingTooLong) {
		t.Errorf("Open: %v; want the listing refused for its entries", err)
	}
	if n > 48<<20 {
		t.Errorf("allocated %d bytes; want under 48 MiB", n)
	}
}

// TestCachedListingIsCheckedAgain: an edited cached listing.json naming
// ../../../evil-Q4_K_M.gguf made inspect request that path, with the
// token (issue #30, item 7); an 80 MB one cost 636 MB on every read. The
// cached listing meets the size bound before it is decoded, the entry
// bound while it is, and every name the check of a fresh listing; an entry
// failing any is discarded and the listing asked of the Hub again.
func TestCachedListingIsCheckedAgain(t *testing.T) {
	evil := `{"repo":"good/repo","commit":"` + listingCommit + `","files":[{"path":"../../../evil-Q4_K_M.gguf","size":100}]}`
	for _, tc := range []struct {
		name  string
		entry func() []byte
	}{
		{"climbing name", func() []byte { return []byte(evil) }},
		{"control characters", func() []byte {
			return []byte(`{"repo":"good/repo","commit":"` + listingCommit + `","files":[{"path":"a\r\nb-Q4_K_M.gguf","size":100}]}`)
		}},
		{"bad hash", func() []byte {
			return []byte(`{"repo":"good/repo","commit":"` + listingCommit + `","files":[{"path":"good-Q4_K_M.gguf","size":100,"sha256":"../x"}]}`)
		}},
		{"over 64 MiB", func() []byte { return append([]byte(evil), bytes.Repeat([]byte(" "), maxListing)...) }},
		{"too many entries", func() []byte {
			var b bytes.Buffer
			b.WriteString(`{"repo":"good/repo","commit":"` + listingCommit + `","files":[`)
			for i := range maxListingEntries + 1 {
				fmt.Fprintf(&b, `{"path":"%x","size":1},`, i)
			}
			b.WriteString(`{"path":"../../../evil-Q4_K_M.gguf","size":100}]}`)
			return b.Bytes()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				asked = append(asked, r.URL.Path)
				mu.Unlock()
				if strings.HasPrefix(r.URL.Path, "/api/models/good/repo/revision/") {
					w.Header().Set("Content-Type", "application/json")
					w.Write([]byte(`{"sha":"` + listingCommit + `","siblings":[]}`))
					return
				}
				http.NotFound(w, r)
			}))
			t.Cleanup(hub.Close)
			c := NewClient(func(k string) string {
				return map[string]string{"HF_ENDPOINT": hub.URL, "HF_TOKEN": testToken}[k]
			})
			c.CacheDir = t.TempDir()
			c.Backoff = time.Millisecond
			t.Cleanup(c.HTTP.CloseIdleConnections)
			hc := headerCache{dir: c.CacheDir, maxHeader: DefaultMaxHeader}
			p := hc.listingPath("good/repo", listingCommit)
			if err := atomicfile.WriteFile(p, tc.entry()); err != nil {
				t.Fatal(err)
			}
			var logs []string
			c.Log = func(s string) { logs = append(logs, s) }
			var err error
			n := allocated(func() { _, err = c.Open(context.Background(), "hf:good/repo:Q4_K_M@"+listingCommit) })
			if err == nil {
				t.Fatal("opened a model the Hub does not list")
			}
			mu.Lock()
			defer mu.Unlock()
			for _, a := range asked {
				if strings.Contains(a, "evil") || strings.Contains(a, "..") || !strings.HasPrefix(a, "/api/models/good/repo/") {
					t.Errorf("requested %s", a)
				}
			}
			if len(asked) != 1 {
				t.Errorf("requests %q; want the listing asked of the Hub again, once", asked)
			}
			if !strings.Contains(strings.Join(logs, "\n"), "ignoring unusable cache entry") {
				t.Errorf("log %q does not say the cache entry was refused", logs)
			}
			if n > 64<<20 {
				t.Errorf("allocated %d bytes reading the cache entry; want under 64 MiB", n)
			}
			t.Logf("%d requests, %d MiB allocated: %v", len(asked), n>>20, err)
		})
	}
}

// TestCachedListingOffline: offline, a refused cache entry is an error
// naming it, never a request.
func TestCachedListingOffline(t *testing.T) {
	dir := t.TempDir()
	hc := headerCache{dir: dir, maxHeader: DefaultMaxHeader}
	p := hc.listingPath("good/repo", listingCommit)
	entry := `{"repo":"good/repo","commit":"` + listingCommit + `","files":[{"path":"../../../evil-Q4_K_M.gguf","size":100}]}`
	if err := atomicfile.WriteFile(p, []byte(entry)); err != nil {
		t.Fatal(err)
	}
	c := NewClient(func(k string) string {
		return map[string]string{"HF_ENDPOINT": "http://127.0.0.1:1", "HF_HUB_OFFLINE": "1"}[k]
	})
	c.CacheDir = dir
	_, err := c.Open(context.Background(), "hf:good/repo:Q4_K_M@"+listingCommit)
	if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "'..' path segment") {
		t.Errorf("Open: %v; want ErrNotCached naming the bad entry", err)
	}
}
