package cli

import (
	"regexp"
	"strings"
	"testing"
)

// What --mlock is told: nothing where the limit allows the locked bytes,
// that llama.cpp's mlock will fail and how to raise the limit where it
// does not, and that it was not checked where it cannot be.
func TestMlockSays(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name      string
		locked    int64
		limit     uint64
		unlimited bool
		why       string
		want      string
	}{
		{"nothing locked", 0, 0, false, "", ""},
		{"within", 4 * gib, 8 * gib, false, "", ""},
		{"exactly", 4 * gib, 4 * gib, false, "", ""},
		{"unlimited", 40 * gib, 8 << 20, true, "", ""},
		{"ulimit 8 MiB", 4 * gib, 8 << 20, false, "", `^--mlock will fail here: RLIMIT_MEMLOCK \('ulimit -l'\) allows 8\.00 MiB and the weights lock 4\.00 GiB; .*ulimit -l unlimited.*LimitMEMLOCK=infinity`},
		{"unreadable", 4 * gib, 0, false, "read on Linux only", `^--mlock locks 4\.00 GiB; RLIMIT_MEMLOCK not checked \(read on Linux only\)$`},
	} {
		got := mlockSays(tc.locked, tc.limit, tc.unlimited, tc.why)
		if tc.want == "" && got != "" || tc.want != "" && !regexp.MustCompile(tc.want).MatchString(got) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := mlockWarning(1<<30, false); !strings.Contains(got, "not checked for --machine") {
		t.Errorf("another machine: %q", got)
	}
}

// fit --mlock (typed, or pasted from a llama-server command line): for a
// build before --load-mode (b10875) the file stays mapped and locked, so
// the pages of repacked weights, reclaimable without it, are charged and
// more RAM is needed; for a newer build --mlock loads the weights instead
// of mapping them, which needs what a mapped load keeps. Either way the
// warnings say what is locked.
func TestFitMlock(t *testing.T) {
	model := synthFile(t, "qwen3-8b")
	required := func(args ...string) string {
		t.Helper()
		code, out, errs := run(t, append([]string{"fit", "--quiet", "--machine", "cpu-32", "-c", "4096"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
		m := regexp.MustCompile(`needs ([0-9.]+) MiB`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%v: no requirement in\n%s", args, out)
		}
		if strings.Contains(strings.Join(args, " "), "--mlock") != strings.Contains(out, "--mlock locks") {
			t.Errorf("%v: the lock is said or not said wrongly:\n%s", args, out)
		}
		return m[1]
	}
	for _, tc := range []struct {
		engine string
		more   bool
	}{{"b10000", true}, {"", false}} {
		eng := []string{"--engine", tc.engine}
		if tc.engine == "" {
			eng = nil
		}
		plain := required(append(eng, model)...)
		pasted := required(append(eng, "--", "llama-server", "-m", model, "--mlock")...)
		typed := required(append(eng, model, "--mlock")...)
		if (pasted != plain) != tc.more || pasted != typed {
			t.Errorf("engine %q: ram needed %s MiB plain, %s pasted --mlock, %s typed --mlock; want more with --mlock %v, the same either way", tc.engine, plain, pasted, typed, tc.more)
		}
	}
}

// plan takes --mlock too, pasted or typed: the command it prints locks in
// the build's words and the explanation says what is locked.
func TestPlanMlock(t *testing.T) {
	model := synthFile(t, "qwen3-0.6b")
	for _, tc := range []struct{ engine, want string }{{"b10000", " --mlock"}, {"", " --load-mode mlock"}} {
		args := []string{"plan", "--quiet", "--machine", "cpu-32"}
		if tc.engine != "" {
			args = append(args, "--engine", tc.engine)
		}
		code, out, errs := run(t, append(args, "--", "llama-server", "-m", model, "--mlock")...)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		// The command comes first, wrapped with shell continuations.
		var first strings.Builder
		for _, line := range strings.Split(out, "\n") {
			cont, more := strings.CutSuffix(line, "\\")
			first.WriteString(strings.TrimSpace(cont) + " ")
			if !more {
				break
			}
		}
		if !strings.Contains(" "+first.String(), tc.want+" ") || !strings.Contains(out, "--mlock locks") {
			t.Errorf("engine %q: want %q in the command printed first and the lock said:\n%s", tc.engine, tc.want, out)
		}
	}
}

// On Linux the limit read is this process's, as 'ulimit -l' shows it.
func TestMemlockLimit(t *testing.T) {
	limit, unlimited, why := memlockLimit()
	if why != "" {
		t.Skip(why)
	}
	if !unlimited && limit == 0 {
		t.Logf("RLIMIT_MEMLOCK is 0: every --mlock is said to fail")
	}
	if got := mlockWarning(int64(min(limit, 1<<40))+1<<20, true); unlimited != (got == "") {
		t.Errorf("limit %d (unlimited %v): %q", limit, unlimited, got)
	}
}
