package cli

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeAPIBeyondLoopback: every interface only when asked for, and
// then only with a token, generated when none is given.
func TestServeAPIBeyondLoopback(t *testing.T) {
	s := newSession(t, nil)
	code, _, stderr := s.run("serve-api", "--addr", "0.0.0.0:0", "--machine", "rtx-4090", "--llama-server", "/nonexistent/llama-server")
	if code != 2 || !strings.Contains(stderr, "beyond loopback") || !strings.Contains(stderr, "--allow-remote") {
		t.Errorf("serve-api on every interface without --allow-remote: exit %d, want 2 and the reason\n%s", code, stderr)
	}
	code, _, stderr = s.run("serve-api", "--addr", "127.0.0.1:0", "--token", "x", "--machine", "rtx-4090")
	if code != 2 || !strings.Contains(stderr, "--token is for --allow-remote") {
		t.Errorf("a token on loopback: exit %d, want 2\n%s", code, stderr)
	}

	for _, tt := range []struct {
		name  string
		flags []string
		want  string // the token, or a pattern for a generated one
	}{
		{"given", []string{"--token", "tok-given-123"}, `tok-given-123`},
		{"generated", nil, `[A-Z2-7]{26}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := append([]string{"serve-api", "--addr", "0.0.0.0:0", "--allow-remote", "--machine", "rtx-4090", "--llama-server", "/nonexistent/llama-server"}, tt.flags...)
			out, errs, wait := s.start(ctx, args...)
			re := regexp.MustCompile(`on http://\S+:(\d+)/#token=(` + tt.want + `)\n`)
			deadline := time.Now().Add(20 * time.Second)
			for re.FindStringSubmatch(out.String()) == nil && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			m := re.FindStringSubmatch(out.String())
			if m == nil {
				cancel()
				wait()
				t.Fatalf("serve-api did not print its address with the token:\n%s\n%s", out, errs)
			}
			if !strings.Contains(errs.String(), "WARNING: listening on") {
				t.Errorf("no warning for listening beyond loopback:\n%s", errs)
			}
			get := func(auth string) int {
				req, _ := http.NewRequest("GET", "http://127.0.0.1:"+m[1]+"/api/hw", nil)
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			if c := get(""); c != 401 {
				t.Errorf("without the token: %d, want 401", c)
			}
			if c := get("Bearer " + m[2]); c != 200 {
				t.Errorf("with the token: %d, want 200", c)
			}
			cancel()
			if code := wait(); code != 0 {
				t.Errorf("exit %d after Ctrl-C\n%s", code, errs)
			}
		})
	}
}
