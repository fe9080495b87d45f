package source

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
)

// ggufFile builds a small model. kib > 0 adds a tokenizer array of that
// many 1 KiB entries, to make the header that much bigger (long tokens
// keep the test fast under -race; the reader sees only bytes); hole adds an
// F32 tensor of that many elements left as zeros, to make the file big.
func ggufFile(t testing.TB, kib int, hole uint64) []byte {
	t.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue("llama"))
	b.Set("llama.block_count", gguf.Uint32Value(1))
	if kib > 0 {
		toks := make([]string, kib)
		pad := strings.Repeat("x", 1024-8-10)
		for i := range toks {
			toks[i] = fmt.Sprintf("%010d", i) + pad
		}
		b.Set("tokenizer.ggml.tokens", gguf.StringsValue(toks))
	}
	if err := b.AddTensor("token_embd.weight", gguf.TypeF32, []uint64{32, 4}, nil); err != nil {
		t.Fatal(err)
	}
	if hole > 0 {
		if err := b.AddTensor("output.weight", gguf.TypeF32, []uint64{hole}, nil); err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// ggufShards builds the n shards of a split model the way gguf-split does:
// metadata in every shard, one tensor per shard.
func ggufShards(t testing.TB, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		b := gguf.NewBuilder()
		b.Set("general.architecture", gguf.StringValue("llama"))
		b.Set(gguf.KeySplitNo, gguf.Uint16Value(uint16(i)))
		b.Set(gguf.KeySplitCount, gguf.Uint16Value(uint16(n)))
		b.Set(gguf.KeySplitTensors, gguf.Int32Value(int32(n)))
		if err := b.AddTensor(fmt.Sprintf("blk.%d.weight", i), gguf.TypeF32, []uint64{32, 2}, nil); err != nil {
			t.Fatal(err)
		}
		data, err := b.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = data
	}
	return out
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fakeHub imitates the Hugging Face Hub: the revision API and /resolve/
// on one server, which redirects file reads to a CDN on another server,
// as the real Hub does.
type fakeHub struct {
	t   *testing.T
	hub *httptest.Server
	cdn *httptest.Server
	// token is what gated repositories require; noAccess is a valid token
	// of an account that was not granted access.
	token, noAccess string

	mu       sync.Mutex
	repos    map[string]*fakeRepo
	blobs    map[string][]byte
	api      int      // API requests
	resolves int      // /resolve/ requests
	ranges   []string // Range headers the CDN saw
	hubAuth  []string // Authorization headers the hub saw
	cdnAuth  []string // Authorization headers the CDN saw (must stay empty)
}

type fakeRepo struct {
	gated  bool
	commit string
	refs   map[string]string
	files  []fakeFile
}

type fakeFile struct {
	path string
	data []byte
}

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{t: t, repos: map[string]*fakeRepo{}, blobs: map[string][]byte{}}
	h.hub = httptest.NewServer(http.HandlerFunc(h.serveHub))
	h.cdn = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	t.Cleanup(h.hub.Close)
	t.Cleanup(h.cdn.Close)
	return h
}

// addRepo publishes files as the repository's main branch and returns the
// commit.
func (h *fakeHub) addRepo(id string, gated bool, files ...fakeFile) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	sum := sha1.New()
	for _, f := range files {
		sum.Write([]byte(f.path))
		sum.Write(f.data)
		h.blobs[sha256Hex(f.data)] = f.data
	}
	commit := hex.EncodeToString(sum.Sum(nil))
	h.repos[id] = &fakeRepo{gated: gated, commit: commit, refs: map[string]string{"main": commit}, files: files}
	return commit
}

func (h *fakeHub) counts() (api, resolves, ranges int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.api, h.resolves, len(h.ranges)
}

// client returns a Client for this hub with a private cache and fast
// retries.
func (h *fakeHub) client(token string) *Client {
	home := h.t.TempDir()
	c := NewClient(func(k string) string {
		return map[string]string{"HF_ENDPOINT": h.hub.URL, "HF_TOKEN": token, "HOME": home}[k]
	})
	c.Backoff = time.Millisecond
	c.Timeout = 5 * time.Second
	h.t.Cleanup(c.HTTP.CloseIdleConnections)
	return c
}

func (h *fakeHub) authorized(r *http.Request, repo *fakeRepo) (int, bool) {
	got := r.Header.Get("Authorization")
	switch {
	case !repo.gated:
		return 0, true
	case got == "Bearer "+h.token:
		return 0, true
	case got == "Bearer "+h.noAccess:
		return http.StatusForbidden, false
	}
	return http.StatusUnauthorized, false
}

func (h *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := r.Header.Get("Authorization"); a != "" {
		h.hubAuth = append(h.hubAuth, a)
	}
	jsonError := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	if rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/models/"); ok {
		h.api++
		parts := strings.SplitN(rest, "/", 4)
		if len(parts) != 4 || parts[2] != "revision" {
			jsonError(http.StatusNotFound, "no such route")
			return
		}
		repo := h.repos[parts[0]+"/"+parts[1]]
		if repo == nil {
			jsonError(http.StatusUnauthorized, "Repository Not Found")
			return
		}
		if code, ok := h.authorized(r, repo); !ok {
			jsonError(code, "Access to model "+parts[0]+"/"+parts[1]+" is restricted.")
			return
		}
		if r.URL.Query().Get("blobs") != "true" {
			jsonError(http.StatusBadRequest, "expected blobs=true")
			return
		}
		rev := strings.ReplaceAll(parts[3], "%2F", "/")
		commit := repo.refs[rev]
		if rev == repo.commit {
			commit = rev
		}
		if commit == "" {
			jsonError(http.StatusNotFound, "Invalid rev id: "+rev)
			return
		}
		type lfs struct {
			SHA256      string `json:"sha256"`
			Size        int    `json:"size"`
			PointerSize int    `json:"pointerSize"`
		}
		type sibling struct {
			RFilename string `json:"rfilename"`
			Size      int    `json:"size"`
			BlobID    string `json:"blobId"`
			LFS       *lfs   `json:"lfs,omitempty"`
		}
		info := struct {
			ID       string    `json:"id"`
			SHA      string    `json:"sha"`
			Siblings []sibling `json:"siblings"`
		}{ID: parts[0] + "/" + parts[1], SHA: commit}
		for _, f := range repo.files {
			s := sibling{RFilename: f.path, Size: len(f.data), BlobID: fmt.Sprintf("%040x", len(f.data))}
			if strings.HasSuffix(f.path, ".gguf") {
				s.LFS = &lfs{SHA256: sha256Hex(f.data), Size: len(f.data), PointerSize: 134}
			}
			info.Siblings = append(info.Siblings, s)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(info)
		return
	}
	// /{owner}/{name}/resolve/{rev}/{path}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	h.resolves++
	repo := h.repos[parts[0]+"/"+parts[1]]
	if repo == nil {
		jsonError(http.StatusUnauthorized, "Repository Not Found")
		return
	}
	if code, ok := h.authorized(r, repo); !ok {
		jsonError(code, "Access restricted")
		return
	}
	if repo.refs[parts[3]] == "" && parts[3] != repo.commit {
		jsonError(http.StatusNotFound, "Invalid rev id")
		return
	}
	for _, f := range repo.files {
		if f.path == parts[4] {
			w.Header().Set("X-Repo-Commit", repo.commit)
			http.Redirect(w, r, h.cdn.URL+"/blob/"+sha256Hex(f.data)+"?X-Amz-Signature=secret", http.StatusFound)
			return
		}
	}
	jsonError(http.StatusNotFound, "Entry not found")
}

func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.ranges = append(h.ranges, r.Header.Get("Range"))
	if a := r.Header.Get("Authorization"); a != "" {
		h.cdnAuth = append(h.cdnAuth, a)
	}
	data, ok := h.blobs[strings.TrimPrefix(r.URL.Path, "/blob/")]
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", `"`+sha256Hex(data)+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}
