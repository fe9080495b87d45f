package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
)

const testToken = "hf_TESTTOKENabcdefghijklmnopqrstuvwxyz0123"

func TestOpenHFFollowsRedirectWithoutLeakingToken(t *testing.T) {
	h := newFakeHub(t)
	h.token = testToken
	model := ggufFile(t, 0, 0)
	proj := ggufFile(t, 0, 0)
	commit := h.addRepo("acme/Llama-GGUF", true,
		fakeFile{"README.md", []byte("# readme")},
		fakeFile{"Llama-Q8_0.gguf", ggufFile(t, 0, 0)},
		fakeFile{"Llama-Q4_K_M.gguf", model},
		fakeFile{"mmproj-Llama-f16.gguf", proj},
	)
	c := h.client(testToken)
	var logMu sync.Mutex
	var logs []string
	c.Log = func(s string) { logMu.Lock(); logs = append(logs, s); logMu.Unlock() }

	hd, err := c.Open(context.Background(), "hf:acme/Llama-GGUF")
	if err != nil {
		t.Fatal(err)
	}
	a := hd.Artifact
	if a.Kind != KindHF || a.Repo != "acme/Llama-GGUF" || a.Revision != "main" || a.Commit != commit || a.QuantTag != "Q4_K_M" {
		t.Errorf("artifact = %+v, want repo acme/Llama-GGUF, revision main, commit %s, tag Q4_K_M", a, commit)
	}
	want := ArtifactFile{Name: "Llama-Q4_K_M.gguf", URL: h.hub.URL + "/acme/Llama-GGUF/resolve/" + commit + "/Llama-Q4_K_M.gguf",
		Size: int64(len(model)), SHA256: sha256Hex(model)}
	if len(a.Files) != 1 || a.Files[0] != want {
		t.Errorf("files = %+v, want [%+v]", a.Files, want)
	}
	if a.MMProj == nil || a.MMProj.Name != "mmproj-Llama-f16.gguf" || a.MMProj.SHA256 != sha256Hex(proj) {
		t.Errorf("mmproj = %+v, want mmproj-Llama-f16.gguf", a.MMProj)
	}
	if hd.Model.Architecture() != "llama" {
		t.Errorf("architecture = %q", hd.Model.Architecture())
	}
	api, resolves, ranges := h.counts()
	if api != 1 || resolves != 1 || ranges != 1 || hd.Stats.APIRequests != 1 || hd.Stats.RangeRequests != 1 {
		t.Errorf("api %d, resolves %d, CDN ranges %d, stats %+v; want 1 of each", api, resolves, ranges, hd.Stats)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.cdnAuth) != 0 {
		t.Errorf("the CDN, another host, received Authorization %q", h.cdnAuth)
	}
	if len(h.hubAuth) != 2 || h.hubAuth[0] != "Bearer "+testToken {
		t.Errorf("the hub received Authorization %q, want the token on the API call and the resolve", h.hubAuth)
	}
	logMu.Lock()
	defer logMu.Unlock()
	for _, l := range logs {
		if strings.Contains(l, testToken) || strings.Contains(l, "X-Amz-Signature") {
			t.Errorf("log line leaks a credential: %q", l)
		}
	}
}

func TestOpenHFSplitModel(t *testing.T) {
	h := newFakeHub(t)
	shards := ggufShards(t, 3)
	files := []fakeFile{{"Big-Q8_0.gguf", ggufFile(t, 0, 0)}}
	for i, s := range shards {
		files = append(files, fakeFile{gguf.ShardName("Q4_K_M/Big-Q4_K_M", i+1, 3), s})
	}
	h.addRepo("acme/Big-GGUF", false, files...)
	c := h.client("")
	hd, err := c.Open(context.Background(), "hf:acme/Big-GGUF:q4_k_m")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range hd.Artifact.Files {
		names = append(names, f.Name)
	}
	wantNames := []string{"Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf", "Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf", "Q4_K_M/Big-Q4_K_M-00003-of-00003.gguf"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("files = %q, want %q", names, wantNames)
	}
	if n := len(hd.Model.Files); n != 3 || len(hd.Model.Tensors) != 3 {
		t.Errorf("model has %d files and %d tensors, want 3 and 3", n, len(hd.Model.Tensors))
	}
	if hd.Stats.RangeRequests != 3 {
		t.Errorf("range requests = %d, want one per shard", hd.Stats.RangeRequests)
	}
	if hd.Artifact.MMProj != nil {
		t.Errorf("mmproj = %+v, want none", hd.Artifact.MMProj)
	}
}

func TestOpenHFSelectionErrors(t *testing.T) {
	h := newFakeHub(t)
	m := ggufFile(t, 0, 0)
	h.addRepo("acme/M-GGUF", false,
		fakeFile{"M-BF16.gguf", m}, fakeFile{"M-F16.gguf", m}, fakeFile{"M-Q4_K_M.gguf", m},
		fakeFile{"M-Q5_K_M-00001-of-00002.gguf", m})
	c := h.client("")
	tests := []struct {
		ref  string
		want []string
	}{
		{"hf:acme/M-GGUF:F16", []string{"ambiguous", "M-BF16.gguf, M-F16.gguf", "llama.cpp's -hf would take M-BF16.gguf", "as in hf:acme/M-GGUF/M-F16.gguf"}},
		{"hf:acme/M-GGUF:Q3_K_S", []string{`matches quant tag "Q3_K_S"`, "available quant tags: BF16, F16, Q4_K_M, Q5_K_M"}},
		{"hf:acme/M-GGUF:Q5_K_M", []string{"shard 2", "M-Q5_K_M-00002-of-00002.gguf", "is not in acme/M-GGUF@main"}},
		{"hf:acme/M-GGUF/M-Q2_K.gguf", []string{`has no file "M-Q2_K.gguf"`, "M-BF16.gguf, M-F16.gguf"}},
		{"hf:acme/M-GGUF@v2", []string{"404", "revision does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			_, err := c.Open(context.Background(), tt.ref)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, _, ranges := h.counts(); ranges != 0 {
		t.Errorf("%d files were read for failed selections", ranges)
	}
}

func TestOpenHFGatedRepo(t *testing.T) {
	h := newFakeHub(t)
	h.token = testToken
	h.noAccess = "hf_NOACCESSnoaccessNOACCESSnoaccess000000"
	h.addRepo("acme/Gated", true, fakeFile{"G-Q4_K_M.gguf", ggufFile(t, 0, 0)})
	tests := []struct {
		name, token string
		want        []string
	}{
		{"no token", "", []string{"401 Unauthorized", "set HF_TOKEN", "private or gated", "is restricted"}},
		{"invalid token", "hf_WRONGwrongWRONGwrongWRONGwrong0000000", []string{"401 Unauthorized", "the token in HF_TOKEN was rejected"}},
		{"token without access", h.noAccess, []string{"403 Forbidden", "HF_TOKEN", "no access", "accept its terms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.client(tt.token).Open(context.Background(), "hf:acme/Gated:Q4_K_M")
			var he *HTTPError
			if !errors.As(err, &he) {
				t.Fatalf("error %v is not an HTTPError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if tt.token != "" && strings.Contains(err.Error(), tt.token) {
				t.Errorf("error %q contains the token", err)
			}
		})
	}
}

func TestCacheServesSecondLook(t *testing.T) {
	h := newFakeHub(t)
	commit := h.addRepo("acme/C-GGUF", false, fakeFile{"C-Q4_K_M.gguf", ggufFile(t, 0, 1<<20)})
	c := h.client("")
	ctx := context.Background()

	first, err := c.Open(ctx, "hf:acme/C-GGUF")
	if err != nil {
		t.Fatal(err)
	}
	if first.Stats.CacheHits != 0 || first.Stats.RangeRequests != 1 {
		t.Errorf("first look: %+v, want 1 range request and no cache hit", first.Stats)
	}
	api0, res0, rng0 := h.counts()

	// A branch must be resolved again (it may have moved), but the header
	// of the commit it names comes from the cache.
	second, err := c.Open(ctx, "hf:acme/C-GGUF")
	if err != nil {
		t.Fatal(err)
	}
	api1, res1, rng1 := h.counts()
	if api1-api0 != 1 || res1 != res0 || rng1 != rng0 || second.Stats != (Stats{APIRequests: 1, CacheHits: 1}) {
		t.Errorf("branch look: %d API, %d resolve, %d range requests, stats %+v; want only the API call",
			api1-api0, res1-res0, rng1-rng0, second.Stats)
	}

	// A commit names fixed content: no request at all.
	third, err := c.Open(ctx, "hf:acme/C-GGUF@"+commit)
	if err != nil {
		t.Fatal(err)
	}
	api2, res2, rng2 := h.counts()
	if api2 != api1 || res2 != res1 || rng2 != rng1 || third.Stats != (Stats{CacheHits: 1}) {
		t.Errorf("commit look made requests: stats %+v", third.Stats)
	}
	if third.Model.Files[0].DataOffset != first.Model.Files[0].DataOffset || third.Model.Size() != first.Model.Size() ||
		len(third.Model.Tensors) != len(first.Model.Tensors) || third.Artifact.Commit != commit {
		t.Errorf("cached model differs: %+v vs %+v", third.Model.Files[0], first.Model.Files[0])
	}
}

func TestCorruptCacheEntryIsRefetched(t *testing.T) {
	h := newFakeHub(t)
	commit := h.addRepo("acme/C-GGUF", false, fakeFile{"C-Q4_K_M.gguf", ggufFile(t, 0, 0)})
	ref := "hf:acme/C-GGUF@" + commit
	corruptions := []struct {
		name string
		mess func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)-40] ^= 0xff; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"empty", func([]byte) []byte { return nil }},
		{"not an entry", func([]byte) []byte { return []byte("GGUF garbage") }},
	}
	for _, cc := range corruptions {
		t.Run(cc.name, func(t *testing.T) {
			c := h.client("")
			if _, err := c.Open(context.Background(), ref); err != nil {
				t.Fatal(err)
			}
			entries, _ := filepath.Glob(filepath.Join(c.CacheDir, "acme--C-GGUF", commit, "*.hdr"))
			if len(entries) != 1 {
				t.Fatalf("cache entries %q, want 1", entries)
			}
			data, _ := os.ReadFile(entries[0])
			if err := os.WriteFile(entries[0], cc.mess(data), 0o644); err != nil {
				t.Fatal(err)
			}
			var logs []string
			c.Log = func(s string) { logs = append(logs, s) }
			hd, err := c.Open(context.Background(), ref)
			if err != nil {
				t.Fatalf("corrupt entry was fatal: %v", err)
			}
			if hd.Stats.CacheHits != 0 || hd.Stats.RangeRequests != 1 {
				t.Errorf("stats %+v, want a refetch", hd.Stats)
			}
			if !slices.ContainsFunc(logs, func(s string) bool { return strings.Contains(s, "ignoring unusable cache entry") }) {
				t.Errorf("logs %q do not mention the corrupt entry", logs)
			}
			again, err := c.Open(context.Background(), ref)
			if err != nil || again.Stats.CacheHits != 1 {
				t.Errorf("after the refetch: %v, stats %+v; want the rewritten entry used", err, again.Stats)
			}
		})
	}
}

func TestOffline(t *testing.T) {
	h := newFakeHub(t)
	commit := h.addRepo("acme/O-GGUF", false, fakeFile{"O-Q4_K_M.gguf", ggufFile(t, 0, 0)})
	h.addRepo("acme/Never", false, fakeFile{"N-Q4_K_M.gguf", ggufFile(t, 0, 0)})
	c := h.client("")
	if _, err := c.Open(context.Background(), "hf:acme/O-GGUF"); err != nil {
		t.Fatal(err)
	}
	api0, res0, rng0 := h.counts()
	env := map[string]string{"HF_ENDPOINT": h.hub.URL, "HF_HUB_OFFLINE": "1"}
	off := NewClient(func(k string) string { return env[k] })
	if !off.Offline {
		t.Fatal("HF_HUB_OFFLINE=1 did not set Offline")
	}
	off.CacheDir = c.CacheDir

	for _, ref := range []string{"hf:acme/O-GGUF", "hf:acme/O-GGUF:Q4_K_M@main", "hf:acme/O-GGUF/O-Q4_K_M.gguf@" + commit} {
		hd, err := off.Open(context.Background(), ref)
		if err != nil {
			t.Errorf("offline %s: %v", ref, err)
			continue
		}
		if hd.Artifact.Commit != commit || hd.Stats != (Stats{CacheHits: 1}) {
			t.Errorf("offline %s: commit %s, stats %+v", ref, hd.Artifact.Commit, hd.Stats)
		}
	}
	for _, tt := range []struct{ ref, want string }{
		{"hf:acme/Never", "never resolved online"},
		{"hf:acme/O-GGUF@v1", "never resolved online"},
		{"hf:acme/O-GGUF@" + strings.Repeat("ab", 20), "is not cached"},
		{h.cdn.URL + "/blob/x.gguf", "is not cached"},
	} {
		_, err := off.Open(context.Background(), tt.ref)
		if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("offline %s: error %v, want ErrNotCached saying %q", tt.ref, err, tt.want)
		}
	}
	if api, res, rng := h.counts(); api != api0 || res != res0 || rng != rng0 {
		t.Errorf("offline mode made requests")
	}
}

func TestOpenHFResolveURLIsCached(t *testing.T) {
	h := newFakeHub(t)
	commit := h.addRepo("acme/U-GGUF", false, fakeFile{"U-Q4_K_M.gguf", ggufFile(t, 0, 0)})
	c := h.client("")
	u := h.hub.URL + "/acme/U-GGUF/resolve/" + commit + "/U-Q4_K_M.gguf"
	first, err := c.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if a := first.Artifact; a.Kind != KindURL || a.Repo != "acme/U-GGUF" || a.Commit != commit {
		t.Errorf("artifact %+v, want the repo and commit of the resolve URL", a)
	}
	second, err := c.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if second.Stats != (Stats{CacheHits: 1}) {
		t.Errorf("second look: stats %+v, want a cache hit and no request", second.Stats)
	}
	// A branch URL may change under us, so it is never cached.
	br := h.hub.URL + "/acme/U-GGUF/resolve/main/U-Q4_K_M.gguf"
	for range 2 {
		hd, err := c.Open(context.Background(), br)
		if err != nil || hd.Stats.RangeRequests != 1 {
			t.Errorf("branch URL: %v, stats %+v; want a fresh read each time", err, hd.Stats)
		}
	}
}

func TestOpenContextCancel(t *testing.T) {
	h := newFakeHub(t)
	h.addRepo("acme/X", false, fakeFile{"X-Q4_K_M.gguf", ggufFile(t, 0, 0)})
	c := h.client("")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	_, err := c.Open(ctx, "hf:acme/X")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if api, _, _ := h.counts(); api != 0 || time.Since(start) > time.Second {
		t.Errorf("a canceled open made %d API requests in %v", api, time.Since(start))
	}
}

func TestArtifactJSON(t *testing.T) {
	a := Artifact{Ref: "hf:a/b", Kind: KindHF, Repo: "a/b", Revision: "main", Commit: strings.Repeat("a", 40), QuantTag: "Q4_K_M",
		Files:  []ArtifactFile{{Name: "m.gguf", URL: "https://x/m.gguf", Size: 1, SHA256: strings.Repeat("b", 64)}},
		MMProj: &ArtifactFile{Name: "mmproj.gguf", Size: 2}}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(data, &m)
	for _, k := range []string{"ref", "kind", "repo", "revision", "commit", "quant_tag", "files", "mmproj"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON %s lacks %q", data, k)
		}
	}
	if !strings.Contains(string(data), `"sha256":"bbbb`) || !strings.Contains(string(data), `"size":1`) {
		t.Errorf("JSON %s lacks file fields", data)
	}
	s, _ := json.Marshal(Stats{RangeRequests: 1, BytesFetched: 2, APIRequests: 3, CacheHits: 4})
	if string(s) != `{"range_requests":1,"bytes_fetched":2,"api_requests":3,"cache_hits":4}` {
		t.Errorf("stats JSON %s", s)
	}
}

func TestNewClientEnvironment(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    Client
		wantDir string
	}{
		{map[string]string{"HOME": "/home/u"}, Client{Endpoint: DefaultEndpoint}, "/home/u/.cache/headroom/headers"},
		{map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg", "HF_ENDPOINT": "https://mirror.example/hf/", "HF_TOKEN": " hf_x ", "HF_HUB_OFFLINE": "true"},
			Client{Endpoint: "https://mirror.example/hf", Token: "hf_x", Offline: true}, "/xdg/headroom/headers"},
		{map[string]string{"XDG_CACHE_HOME": "relative", "HF_HUB_OFFLINE": "0"}, Client{Endpoint: DefaultEndpoint}, ""},
	}
	for _, tt := range tests {
		c := NewClient(func(k string) string { return tt.env[k] })
		if c.Endpoint != tt.want.Endpoint || c.Token != tt.want.Token || c.Offline != tt.want.Offline || c.CacheDir != filepath.FromSlash(tt.wantDir) {
			t.Errorf("env %v: endpoint %q token %q offline %v cache %q", tt.env, c.Endpoint, c.Token, c.Offline, c.CacheDir)
		}
		if c.InitialRead != 4<<20 || c.MaxHeader != 256<<20 || c.Attempts != 3 || c.HTTP == nil {
			t.Errorf("defaults not set: %+v", c)
		}
	}
	c := NewClient(func(string) string { return "" })
	c.Endpoint = "ftp://nope"
	if _, err := c.Open(context.Background(), "hf:a/b"); err == nil || !strings.Contains(err.Error(), "HF_ENDPOINT") {
		t.Errorf("bad endpoint: error %v", err)
	}
}

func TestOpenLocal(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	single := write("one-Q8_0.gguf", ggufFile(t, 0, 0))
	var shards []string
	for i, s := range ggufShards(t, 3) {
		shards = append(shards, write(gguf.ShardName("split-Q4_K_M", i+1, 3), s))
	}
	for i, s := range ggufShards(t, 2)[:1] {
		write(gguf.ShardName("broken", i+1, 2), s)
	}
	write("notes.txt", []byte("hello, not a model"))
	c := NewClient(func(string) string { return "" })

	tests := []struct {
		ref       string
		wantFiles []string
		wantTag   string
		wantErr   string
	}{
		{ref: single, wantFiles: []string{single}, wantTag: "Q8_0"},
		{ref: shards[0], wantFiles: shards, wantTag: "Q4_K_M"},
		{ref: shards[1], wantFiles: shards, wantTag: "Q4_K_M"},
		{ref: filepath.Join(dir, gguf.ShardName("broken", 1, 2)), wantErr: "is shard 1 of a 2-file split model, but shard 2 is missing"},
		{ref: dir, wantErr: "is a directory"},
		{ref: filepath.Join(dir, "absent.gguf"), wantErr: "no such file"},
		{ref: filepath.Join(dir, "notes.txt"), wantErr: "not a GGUF file"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.ref), func(t *testing.T) {
			hd, err := c.Open(context.Background(), tt.ref)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range hd.Artifact.Files {
				got = append(got, f.Path)
				if st, _ := os.Stat(f.Path); st == nil || st.Size() != f.Size {
					t.Errorf("file %+v: size differs from the disk's", f)
				}
			}
			if !slices.Equal(got, tt.wantFiles) || hd.Artifact.Kind != KindLocal || hd.Artifact.QuantTag != tt.wantTag {
				t.Errorf("artifact %+v, want files %q and tag %s", hd.Artifact, tt.wantFiles, tt.wantTag)
			}
			if len(hd.Model.Files) != len(tt.wantFiles) || hd.Stats != (Stats{}) {
				t.Errorf("%d files, stats %+v", len(hd.Model.Files), hd.Stats)
			}
		})
	}
}

func TestClientNeverPrintsToken(t *testing.T) {
	c := NewClient(func(k string) string { return map[string]string{"HF_TOKEN": testToken}[k] })
	b, _ := json.Marshal(c.Token)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", c, *c, c.Token, c.Token), string(b)} {
		if strings.Contains(s, testToken) {
			t.Errorf("printed client shows the token: %s", s)
		}
	}
	if string(c.Token) != testToken {
		t.Errorf("the token itself was lost")
	}
}
