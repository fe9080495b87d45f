package store

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const fileSize = 300 << 10

func TestPullInstalls(t *testing.T) {
	data := randomBytes(1, fileSize)
	o := &origin{files: map[string][]byte{"/Llama-Q4_K_M.gguf": data}}
	srv := serve(t, o)
	s := testStore(t)
	var mu sync.Mutex
	var calls []Progress
	s.Progress = func(p Progress) {
		mu.Lock()
		calls = append(calls, p)
		mu.Unlock()
	}
	a := oneFile(srv, "/Llama-Q4_K_M.gguf", data)
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 1 || len(m.Extra) != 0 {
		t.Fatalf("manifest files %d extra %d, expected 1 and 0", len(m.Files), len(m.Extra))
	}
	in := m.Files[0]
	checkInstalled(t, s, in, data, true)
	if in.AlreadyPresent {
		t.Error("first pull reported the file as already present")
	}
	want := filepath.Join(s.Root, "models", "owner", "model", a.Commit, "Llama-Q4_K_M.gguf")
	if in.Path != want || m.Dir != filepath.Dir(want) {
		t.Errorf("link %s in %s, expected %s", in.Path, m.Dir, want)
	}
	if got := entries(t, s.partDir()); len(got) != 0 {
		t.Errorf("partial/ holds %v after a finished pull", got)
	}
	if _, err := os.Stat(filepath.Join(s.Root, "manifests", "owner", "model", a.Commit, "Llama-Q4_K_M.gguf.json")); err != nil {
		t.Errorf("manifest: %v", err)
	}
	got, ok, err := s.Lookup(a.Repo, a.Commit, []string{"Llama-Q4_K_M.gguf"})
	if err != nil || !ok {
		t.Fatalf("Lookup = %v, %v; expected the installed manifest", ok, err)
	}
	if got.Files[0].Path != in.Path || got.Files[0].Blob != in.Blob || got.Ref != a.Ref || got.InstalledAt.IsZero() {
		t.Errorf("Lookup returned %+v, expected what Pull returned %+v", got, m)
	}
	if o.agents[0] != "headroom" {
		t.Errorf("User-Agent %q, expected headroom", o.agents[0])
	}
	if len(calls) == 0 {
		t.Fatal("Progress was never called")
	}
	last := calls[len(calls)-1]
	if last.Phase != PhaseDone || last.Done != fileSize || last.Total != fileSize || last.File != "Llama-Q4_K_M.gguf" || last.Index != 1 || last.Count != 1 {
		t.Errorf("last progress %+v, expected the file done", last)
	}
}

// TestPullResumesAfterDrop also sends the download through a redirect to
// another host, as the Hub does, with a signed query that must not leak.
func TestPullResumesAfterDrop(t *testing.T) {
	data := randomBytes(2, fileSize)
	o := &origin{files: map[string][]byte{"/cdn/m.gguf": data}, cutAt: fileSize / 2, cut: drop}
	cdn := serve(t, o)
	hub := serve(t, http.RedirectHandler(cdn.URL+"/cdn/m.gguf?X-Amz-Signature=s3cr3t", http.StatusFound))
	s := testStore(t)
	a := oneFile(hub, "/resolve/m.gguf", data)
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, true)
	requests, served, ranges := o.stats()
	if requests != 2 || ranges[0] != "" {
		t.Fatalf("CDN saw ranges %q, expected a whole request then a resumed one", ranges)
	}
	if ranges[1] != "bytes="+strconv.Itoa(fileSize/2)+"-" {
		t.Errorf("resumed with %q, expected bytes=%d-", ranges[1], fileSize/2)
	}
	if served >= 2*fileSize {
		t.Errorf("served %d bytes for a %d-byte file", served, fileSize)
	}
}

func TestPullKilledHalfway(t *testing.T) {
	data := randomBytes(3, fileSize)
	s := testStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	part := s.partPath(digest(data))
	o := &origin{files: map[string][]byte{"/m.gguf": data}, cutAt: fileSize / 2,
		cut: func(w http.ResponseWriter, r *http.Request) {
			// Wait until the client has saved some bytes, then kill it.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if fi, err := os.Stat(part); err == nil && fi.Size() > 0 {
					break
				}
			}
			cancel()
			stall(w, r)
		}}
	srv := serve(t, o)
	a := oneFile(srv, "/m.gguf", data)
	_, err := s.Pull(ctx, a)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Pull after cancel: %v, expected context.Canceled", err)
	}
	fi, err := os.Stat(part)
	if err != nil || fi.Size() == 0 || fi.Size() > fileSize/2 {
		t.Fatalf("part after cancel: %v, %v; expected up to half the file", fi, err)
	}
	if got := entries(t, s.blobDir()); len(got) != 0 {
		t.Fatalf("blobs after cancel: %v", got)
	}
	if _, ok, _ := s.Lookup(a.Repo, a.Commit, []string{"m.gguf"}); ok {
		t.Fatal("Lookup found an artifact whose pull was cancelled")
	}
	if got := entries(t, s.modelDir()); len(got) != 0 {
		t.Fatalf("models/ after cancel: %v", got)
	}
	if need, err := s.Need(a); err != nil || need != fileSize-fi.Size() {
		t.Errorf("Need = %d, %v; expected %d", need, err, fileSize-fi.Size())
	}

	var resumed []int64
	s.Progress = func(p Progress) {
		if p.Phase == PhaseDownload {
			resumed = append(resumed, p.Resumed)
		}
	}
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, true)
	if len(resumed) == 0 || resumed[0] != fi.Size() {
		t.Errorf("progress Resumed %v, expected %d", resumed, fi.Size())
	}
	_, served, ranges := o.stats()
	if want := "bytes=" + strconv.FormatInt(fi.Size(), 10) + "-"; ranges[len(ranges)-1] != want {
		t.Errorf("second pull asked %q, expected %q", ranges[len(ranges)-1], want)
	}
	if served >= 2*fileSize {
		t.Errorf("served %d bytes for a %d-byte file", served, fileSize)
	}
}

func TestPullChecksumMismatch(t *testing.T) {
	data := randomBytes(4, fileSize)
	srv := serve(t, &origin{files: map[string][]byte{"/m.gguf": data}})
	s := testStore(t)
	a := oneFile(srv, "/m.gguf", data)
	a.Files[0].SHA256 = strings.ToUpper(digest([]byte("something else")))
	_, err := s.Pull(context.Background(), a)
	var ce *ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("Pull: %v, expected a *ChecksumError", err)
	}
	if ce.File != "m.gguf" || ce.Want != digest([]byte("something else")) || ce.Got != digest(data) {
		t.Errorf("ChecksumError %+v, expected file m.gguf, want the given digest, got the served one", ce)
	}
	for _, dir := range []string{s.blobDir(), s.partDir(), s.modelDir(), s.manifestDir()} {
		if got := entries(t, dir); len(got) != 0 {
			t.Errorf("%s holds %v after a checksum mismatch", dir, got)
		}
	}
}

func TestPullWithoutRangeSupport(t *testing.T) {
	data := randomBytes(5, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}, ignoreRange: true, cutAt: fileSize / 2, cut: drop}
	srv := serve(t, o)
	s := testStore(t)
	m, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, true)
	requests, served, ranges := o.stats()
	if requests != 2 || !strings.HasPrefix(ranges[1], "bytes=") {
		t.Errorf("ranges %q, expected a resume attempt", ranges)
	}
	if served != fileSize/2+fileSize {
		t.Errorf("served %d bytes, expected half then the whole file again", served)
	}
}

func TestPullStalledServer(t *testing.T) {
	data := randomBytes(6, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}, cutAt: fileSize / 3, cut: stall}
	srv := serve(t, o)
	s := testStore(t)
	s.Timeout = 150 * time.Millisecond
	m, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, true)
	if _, _, ranges := o.stats(); len(ranges) != 2 || ranges[1] != "bytes="+strconv.Itoa(fileSize/3)+"-" {
		t.Errorf("ranges %q, expected a resume from %d after the stall", ranges, fileSize/3)
	}
}

func TestPullSizeMismatch(t *testing.T) {
	data := randomBytes(7, fileSize)
	tests := []struct {
		name      string
		size      int64
		noLength  bool
		announced bool
	}{
		{"server announces fewer bytes", fileSize + 1000, false, true},
		{"server announces more bytes", fileSize - 1000, false, true},
		{"server sends more bytes than expected", fileSize - 100, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, &origin{files: map[string][]byte{"/m.gguf": data}, noLength: tt.noLength})
			s := testStore(t)
			a := oneFile(srv, "/m.gguf", data)
			a.Files[0].Size = tt.size
			_, err := s.Pull(context.Background(), a)
			var se *SizeError
			if !errors.As(err, &se) {
				t.Fatalf("Pull: %v, expected a *SizeError", err)
			}
			if se.File != "m.gguf" || se.Want != tt.size || se.Announced != tt.announced {
				t.Errorf("SizeError %+v, expected file m.gguf, want %d, announced %v", se, tt.size, tt.announced)
			}
			for _, dir := range []string{s.blobDir(), s.partDir(), s.manifestDir()} {
				if got := entries(t, dir); len(got) != 0 {
					t.Errorf("%s holds %v after a size mismatch", dir, got)
				}
			}
		})
	}
}

func TestPullStatuses(t *testing.T) {
	data := randomBytes(8, 64<<10)
	tests := []struct {
		name     string
		statuses []int
		attempts int
		// wantStatus is the final *HTTPError's status; 0 for success,
		// -1 for giving up.
		wantStatus   int
		wantRequests int
	}{
		{"not found is final", []int{404}, 5, 404, 1},
		{"forbidden is final", []int{403}, 5, 403, 1},
		{"5xx and 429 are retried", []int{503, 429, 500}, 5, 0, 4},
		{"retries run out", []int{502, 502, 502, 502}, 3, -1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &origin{files: map[string][]byte{"/m.gguf": data}, statuses: tt.statuses}
			srv := serve(t, o)
			s := testStore(t)
			s.Attempts = tt.attempts
			a := oneFile(srv, "/m.gguf", data)
			a.Files[0].URL += "?token=s3cr3t"
			m, err := s.Pull(context.Background(), a)
			requests, _, _ := o.stats()
			if requests != tt.wantRequests {
				t.Errorf("%d requests, expected %d", requests, tt.wantRequests)
			}
			switch tt.wantStatus {
			case 0:
				if err != nil {
					t.Fatal(err)
				}
				checkInstalled(t, s, m.Files[0], data, true)
				return
			case -1:
				if err == nil || !strings.Contains(err.Error(), "gave up") || !strings.Contains(err.Error(), "502") {
					t.Fatalf("Pull: %v, expected giving up after 502s", err)
				}
			default:
				var he *HTTPError
				if !errors.As(err, &he) || he.StatusCode != tt.wantStatus {
					t.Fatalf("Pull: %v, expected an *HTTPError with status %d", err, tt.wantStatus)
				}
				if msg := err.Error(); !strings.Contains(msg, "m.gguf") || !strings.Contains(msg, strconv.Itoa(tt.wantStatus)) {
					t.Errorf("error %q does not name the file and status", msg)
				}
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q shows the URL's query", err)
			}
			if got := entries(t, s.blobDir()); len(got) != 0 {
				t.Errorf("blobs after a failed pull: %v", got)
			}
		})
	}
}

// TestPullGivesUpOnDropsWithoutRange: a server that drops every
// connection and cannot resume makes no progress, so the attempts run out
// instead of looping for ever.
func TestPullGivesUpOnDropsWithoutRange(t *testing.T) {
	data := randomBytes(9, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}, ignoreRange: true, cutAt: fileSize / 2, cut: drop}
	srv := serve(t, o)
	s := testStore(t)
	s.Attempts = 3
	// Every request drops halfway, not only the first.
	o.cutEvery = true
	_, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
	if err == nil || !strings.Contains(err.Error(), "gave up after 3") {
		t.Fatalf("Pull: %v, expected giving up after 3 attempts", err)
	}
	if requests, _, _ := o.stats(); requests != 3 {
		t.Errorf("%d requests, expected 3: the first got halfway, the next two no further", requests)
	}
}
