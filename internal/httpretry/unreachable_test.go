package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A name that does not resolve and a port nothing listens on are
// unreachable; a server's answer, a broken transfer and a timeout of a
// connection made are not.
func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	closed := srv.URL
	srv.Close()
	get := func(u string) error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"unresolvable", get("http://headroom-test.invalid/x"), true},
		{"refused", get(closed + "/x"), true},
		{"wrapped dns", fmt.Errorf("GET x: %w", &net.DNSError{Err: "no such host", Name: "h.invalid", IsNotFound: true}), true},
		{"reset after connect", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, false},
		{"eof", io.ErrUnexpectedEOF, false},
		{"nil", nil, false},
	} {
		if tc.err == nil && tc.name != "nil" {
			t.Fatalf("%s: the request succeeded", tc.name)
		}
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("%s: Unreachable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
