package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/server"
)

// TestServeAPIBeyondLoopback: every interface only when asked for, and
// then only with a token, generated when none is given.
func TestServeAPIBeyondLoopback(t *testing.T) {
	s := newSession(t, nil)
	code, _, stderr := s.run("serve-api", "--addr", "0.0.0.0:0", "--machine", "rtx-4090", "--llama-server", "/nonexistent/llama-server")
	if code != 2 || !strings.Contains(stderr, "beyond loopback") || !strings.Contains(stderr, "--allow-remote") {
		t.Errorf("serve-api on every interface without --allow-remote: exit %d, want 2 and the reason\n%s", code, stderr)
	}
	code, _, stderr = s.run("serve-api", "--addr", "127.0.0.1:0", "--token", "tok-given-1234567890", "--machine", "rtx-4090")
	if code != 2 || !strings.Contains(stderr, "are for --allow-remote") {
		t.Errorf("a token on loopback: exit %d, want 2\n%s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("tok-from-file-1234567890\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name  string
		flags []string
		env   string // $HEADROOM_API_TOKEN
		want  string // the token, or a pattern for a generated one
		ps    bool   // the warning that ps shows it
	}{
		{"given", []string{"--token", "tok-given-1234567890"}, "", `tok-given-1234567890`, true},
		{"file", []string{"--token-file", file}, "", `tok-from-file-1234567890`, false},
		{"environment", nil, "tok-from-env-1234567890", `tok-from-env-1234567890`, false},
		{"generated", nil, "", `[A-Z2-7]{26}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := append([]string{"serve-api", "--addr", "0.0.0.0:0", "--allow-remote", "--machine", "rtx-4090", "--llama-server", "/nonexistent/llama-server"}, tt.flags...)
			s.vars["HEADROOM_API_TOKEN"] = tt.env
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
			if warned := strings.Contains(errs.String(), "visible to every user of this machine"); warned != tt.ps {
				t.Errorf("warned that ps shows --token: %v, want %v\n%s", warned, tt.ps, errs)
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

// TestServeAPIRefusesWeakTokens: --allow-remote --token a was accepted (a
// token of one character); a token short or holding a line break, from
// any source, is refused before anything listens, saying why and never
// echoing it.
func TestServeAPIRefusesWeakTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		flags []string
		env   string
		code  int
		want  string
	}{
		{"one character", []string{"--token", "a"}, "", 2, "has 1 characters; at least 16"},
		{"fifteen", []string{"--token", "abcdefghijklmno"}, "", 2, "has 15 characters"},
		{"line break", []string{"--token", "abcdefghijklmnop\r\nX: y"}, "", 2, "byte 0x0d at 17"},
		{"space", []string{"--token", "abcdefgh ijklmnop"}, "", 2, "byte 0x20 at 9"},
		{"short file", []string{"--token-file", write("short", "abc\n")}, "", 2, "from --token-file"},
		{"empty file", []string{"--token-file", write("empty", "\n")}, "", 1, "is empty"},
		{"missing file", []string{"--token-file", filepath.Join(dir, "none")}, "", 1, "reading the API token"},
		{"both", []string{"--token", "abcdefghijklmnopq", "--token-file", write("ok", "abcdefghijklmnopq")}, "", 2, "use one"},
		{"short environment", nil, "abc", 2, "from $HEADROOM_API_TOKEN has 3 characters"},
	} {
		s := newSession(t, nil)
		s.vars["HEADROOM_API_TOKEN"] = tc.env
		args := append([]string{"serve-api", "--addr", "0.0.0.0:0", "--allow-remote", "--machine", "rtx-4090", "--llama-server", "/nonexistent/llama-server"}, tc.flags...)
		start := time.Now()
		code, out, errs := s.run(args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, want %d and %q\n%s", tc.name, code, tc.code, tc.want, errs)
		}
		if strings.Contains(out, "API token:") || strings.Contains(errs, "ijklmnop") {
			t.Errorf("%s: served, or echoed the token:\n%s\n%s", tc.name, out, errs)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: refused after %v; want at once", tc.name, d)
		}
	}
}

// TestPanelCommandIsPlans: the command line the panel shows (the API's
// /api/plan command) is the one 'headroom plan' prints first, argument for
// argument, so the two never tell a person different things to run.
func TestPanelCommandIsPlans(t *testing.T) {
	h, err := server.New(server.Config{Machine: func(context.Context) (*hw.Snapshot, error) {
		return nil, errors.New("only presets are asked for here")
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ model, machine string }{
		{"qwen3-8b/Q4_K_M", "rtx-4090"},
		{"gemma-3-27b-it/Q8_0", "rtx-4090"},
		{"qwen3-30b-a3b/Q4_K_M", "cpu-32"},
	} {
		code, out, errs := run(t, "plan", tc.model, "--machine", tc.machine)
		if code != 0 {
			t.Fatalf("plan %s: exit %d\n%s%s", tc.model, code, out, errs)
		}
		// The command comes first, wrapped with shell continuations.
		printed, _, _ := strings.Cut(out, "\n\n")
		printed = strings.ReplaceAll(printed, "\\\n", "")
		res, err := http.Get(srv.URL + "/api/plan?" + url.Values{"model": {tc.model}, "machine": {tc.machine}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var answer struct {
			Command []string `json:"command"`
		}
		err = json.NewDecoder(res.Body).Decode(&answer)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := answer.Command, strings.Fields(printed); len(want) < 4 || !slices.Equal(got, want) {
			t.Errorf("%s on %s: the API's command\n%q\nwant plan's\n%q", tc.model, tc.machine, got, want)
		}
	}
}

// TestServeAPIRefusesDrafts: serve-api's flags apply to every model it
// serves, and a draft is one model's; each of the speculative flags is
// refused with the reason, before anything starts.
func TestServeAPIRefusesDrafts(t *testing.T) {
	s := newSession(t, nil)
	for _, args := range [][]string{{"--spec-type", "draft-mtp"}, {"--spec-draft-n-max", "4"}, {"-ctkd", "q8_0"}} {
		code, _, stderr := s.run(append([]string{"serve-api", "--addr", "127.0.0.1:0", "--machine", "rtx-4090"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "only some can draft") {
			t.Errorf("serve-api %v: exit %d, want 2 and the reason\n%s", args, code, stderr)
		}
	}
}
