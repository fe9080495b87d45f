package store

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// countingTransport counts the requests it sends and, where refuse says
// so for the request of that number (1-based), fails it as a connection
// that could not be made.
type countingTransport struct {
	rt     http.RoundTripper
	n      atomic.Int32
	refuse func(n int32) bool
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	n := c.n.Add(1)
	if c.refuse != nil && c.refuse(n) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: network is unreachable")}
	}
	return c.rt.RoundTrip(r)
}

// A file whose host does not resolve, or where nothing listens, is asked
// for once: the pull fails at once, saying the network is unreachable and
// that a pull cannot work offline, with no retry and no backoff.
func TestPullUnreachableOnce(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	closed := srv.URL
	srv.Close()
	data := randomBytes(7, 4096)
	for _, tc := range []struct{ name, base string }{
		{"unresolvable", "http://cdn.headroom.invalid"},
		{"refused", closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			ct := &countingTransport{rt: s.HTTP.Transport}
			s.HTTP.Transport = ct
			s.Attempts = 5
			a := Artifact{Ref: "hf:owner/model", Repo: "owner/model", Commit: "0123456789abcdef0123456789abcdef01234567",
				Files: []File{{Name: "m.gguf", URL: tc.base + "/m.gguf?X-Amz-Signature=s3cr3t", Size: int64(len(data)), SHA256: digest(data)}}}
			_, err := s.Pull(context.Background(), a)
			t.Log(err)
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("got %v, want ErrUnreachable", err)
			}
			for _, want := range []string{"the network is unreachable", "cannot work offline", "run the pull again", "m.gguf"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			for _, bad := range []string{"gave up after", "s3cr3t"} {
				if strings.Contains(err.Error(), bad) {
					t.Errorf("error %q says %q", err, bad)
				}
			}
			if n := ct.n.Load(); n != 1 {
				t.Errorf("%d requests sent, want 1", n)
			}
		})
	}
}

// A network that drops in the middle of a transfer is retried: the
// connection broke after the server answered, and a reconnection that
// fails once is the same dropped network, not a host that is not there.
func TestPullRetriesDialAfterTransferBegan(t *testing.T) {
	data := randomBytes(8, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}, cutAt: fileSize / 2, cut: drop}
	srv := serve(t, o)
	s := testStore(t)
	ct := &countingTransport{rt: s.HTTP.Transport, refuse: func(n int32) bool { return n == 2 }}
	s.HTTP.Transport = ct
	m, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, true)
	if n := ct.n.Load(); n != 3 {
		t.Errorf("%d requests sent, want 3: the cut one, the refused one, the resumed one", n)
	}
	if _, _, ranges := o.stats(); len(ranges) != 2 || ranges[0] != "" || !strings.HasPrefix(ranges[1], "bytes=") {
		t.Errorf("the server saw ranges %q, want a whole request then a resumed one", ranges)
	}
}
