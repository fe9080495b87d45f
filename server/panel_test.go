package server

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"image"
	"image/draw"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/plan"
)

// findChromium returns the browser the panel test drives, or skips the
// test where there is none (unless HEADROOM_REQUIRE_CHROMIUM=1 says CI
// installed one, where its absence is a failure).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("HEADROOM_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("HEADROOM_REQUIRE_CHROMIUM=1 but neither chromium nor chromium-browser is on PATH")
	}
	t.Skip("no chromium on PATH; the panel test needs a headless browser")
	return ""
}

// chromium runs one headless capture of url: the DOM after the page's
// scripts ran (--dump-dom) or a screenshot (--screenshot=FILE), with its
// own profile directory. Virtual time lets the page settle without the
// test sleeping.
func chromium(ctx context.Context, bin, profile, url string, capture ...string) ([]byte, error) {
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profile, "--window-size=1280,1100",
		// Twice the pixels: thin segments (a compute buffer is 2% of a
		// GPU) become countable, and the saved image is sharp to review.
		"--force-device-scale-factor=2",
		"--virtual-time-budget=15000"}
	args = append(append(args, capture...), url)
	cmd := exec.CommandContext(ctx, bin, args...)
	// The browser's helpers may hold the pipes after it is killed.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("chromium %s: %w (after %v)\n%s", strings.Join(capture, " "), err, time.Since(start), tail(stderr.String(), 2000))
	}
	return stdout.Bytes(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// getJSON fetches an API answer from the test server.
func getJSON[T any](t *testing.T, url string) T {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: status %d: %s", url, res.StatusCode, buf.Bytes())
	}
	return decode[T](t, buf.Bytes())
}

var (
	segmentTag = regexp.MustCompile(`<div class="(?:seg|overflow)"[^>]*>`)
	attr       = regexp.MustCompile(`(data-[a-z]+)="([^"]*)"`)
	fitQuery   = regexp.MustCompile(`id="assessment" data-query="([^"]*)"`)
	readyBody  = regexp.MustCompile(`<body[^>]*\bdata-ready="1"`)
	recRow     = regexp.MustCompile(`<tr class="(fits|disabled)" data-model="`)
	mibFigure  = regexp.MustCompile(`[0-9.]+ [MK]iB`)
)

// segments reads the drawn segments from the DOM: domain/kind -> bytes.
func segments(t *testing.T, dom string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, tag := range segmentTag.FindAllString(dom, -1) {
		a := map[string]string{}
		for _, m := range attr.FindAllStringSubmatch(tag, -1) {
			a[m[1]] = m[2]
		}
		n, err := strconv.ParseInt(a["data-bytes"], 10, 64)
		if err != nil || a["data-kind"] == "" || a["data-domain"] == "" {
			t.Fatalf("segment %s lacks data-kind, data-domain or a whole data-bytes", tag)
		}
		out[a["data-domain"]+"/"+a["data-kind"]] = n
	}
	return out
}

// countColors counts the pixels within a small distance of each color:
// the screenshot is of flat fills, so exact colors appear only where
// something was drawn in them.
func countColors(img image.Image, colors map[string][3]int) map[string]int {
	type want struct {
		name    string
		r, g, b int
		n       int
	}
	var ws []want
	for name, c := range colors {
		ws = append(ws, want{name: name, r: c[0], g: c[1], b: c[2]})
	}
	b := img.Bounds()
	// Chromium's PNG decodes as RGBA; reading its bytes directly keeps the
	// five million pixels of a 2x screenshot quick under -race.
	rgba, ok := img.(*image.RGBA)
	if !ok {
		rgba = image.NewRGBA(b)
		draw.Draw(rgba, b, img, b.Min, draw.Src)
	}
	for y := range b.Dy() {
		row := rgba.Pix[y*rgba.Stride : y*rgba.Stride+4*b.Dx()]
		for x := 0; x < len(row); x += 4 {
			r, g, bl := int(row[x]), int(row[x+1]), int(row[x+2])
			for i := range ws {
				if abs(r-ws[i].r) <= 6 && abs(g-ws[i].g) <= 6 && abs(bl-ws[i].b) <= 6 {
					ws[i].n++
				}
			}
		}
	}
	out := map[string]int{}
	for _, w := range ws {
		out[w.name] = w.n
	}
	return out
}

func abs(x int) int { return max(x, -x) }

// TestPanel loads the panel in headless Chromium and checks what it drew
// against what the API says for the same request: the DOM's segments carry
// the assessment's bytes, and the screenshot has the bars in their colors.
func TestPanel(t *testing.T) {
	bin := findChromium(t)
	srv := httptest.NewServer(newTestHandler(t, nil))
	t.Cleanup(srv.Close)
	// Derive the catalog's planner inputs once, before browsers compete
	// for the CPU with the first ranking.
	getJSON[recommendAnswer](t, srv.URL+"/api/recommend?machine=rtx-4090")
	shots := os.Getenv("HEADROOM_SCREENSHOT_DIR")

	tests := []struct {
		name    string
		model   string
		verdict string
		drawn   []string // colors that must fill a meaningful area
		notRed  bool     // no overflow: red only in the legend
	}{
		// 51 of 63 layers on the 24 GB card, the rest in system RAM.
		{"partly-on-gpu", "gemma-3-27b-it/Q8_0", plan.Fits, []string{"model", "context", "compute"}, true},
		// No plan fits; every layer on the card overflows it.
		{"does-not-fit", "qwen3-235b-a22b/Q4_K_M", plan.DoesNotFit, []string{"model", "overflow"}, false},
		// The plan keeps some layers' experts in system RAM (--n-cpu-moe):
		// the panel must check it as planned, or it would draw an overflow.
		{"moe-experts-in-ram", "gpt-oss-120b/MXFP4_MOE", plan.Fits, []string{"model", "context", "compute"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			page := srv.URL + "/?" + url.Values{"machine": {"rtx-4090"}, "model": {tt.model}}.Encode()

			shotFile := filepath.Join(t.TempDir(), "panel-"+tt.name+".png")
			if shots != "" {
				if err := os.MkdirAll(shots, 0o755); err != nil {
					t.Fatal(err)
				}
				shotFile = filepath.Join(shots, "panel-"+tt.name+".png")
			}
			// The two captures are independent page loads; run them side
			// by side.
			profiles := []string{t.TempDir(), t.TempDir()}
			start := time.Now()
			shotErr := make(chan error, 1)
			go func() {
				_, err := chromium(ctx, bin, profiles[0], page, "--screenshot="+shotFile)
				shotErr <- err
			}()
			out, err := chromium(ctx, bin, profiles[1], page, "--dump-dom")
			if err2 := <-shotErr; err == nil {
				err = err2
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("dump-dom and screenshot in %v", time.Since(start).Round(time.Millisecond))
			dom := string(out)
			// The machine picker offers the presets, and the legend says
			// how many slots every plan runs and how far off the speed
			// estimates have been.
			for _, want := range []string{`<option value="cpu-32"`, `<span id="rec-slots">2</span>`, "calibrated figures were -6%..+23% off published"} {
				if !strings.Contains(dom, want) {
					t.Errorf("the page lacks %q", want)
				}
			}

			if !readyBody.MatchString(dom) {
				t.Fatalf("body never got data-ready=1:\n%s", tail(dom, 3000))
			}
			m := fitQuery.FindStringSubmatch(dom)
			if m == nil {
				t.Fatalf("no assessment drawn:\n%s", tail(dom, 3000))
			}
			query := html.UnescapeString(m[1])
			checkPreset(t, srv.URL, tt.model, query)
			checkCommand(t, srv.URL, tt.model, dom)
			a := getJSON[fitAnswer](t, srv.URL+"/api/fit?"+query)
			if a.Verdict != tt.verdict {
				t.Errorf("verdict %q, want %q (%s)", a.Verdict, tt.verdict, a.Reason)
			}
			want := map[string]int64{}
			for _, d := range a.Domains {
				for kind, n := range map[string]int64{"model": d.Model, "context": d.Context, "compute": d.Compute, "auxiliary": d.Auxiliary} {
					want[d.ID+"/"+kind] = n
				}
				if d.Margin < 0 {
					want[d.ID+"/overflow"] = -d.Margin
				}
			}
			got := segments(t, dom)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("drawn segments (domain/kind: bytes)\n%v\nwant the assessment's\n%v", got, want)
			}
			if tt.verdict == plan.Fits && (want["ram/model"] == 0 || want["gpu0/model"] == 0) {
				t.Errorf("%s should be split between ram and gpu0, got %v", tt.model, want)
			}
			rows := recRow.FindAllStringSubmatch(dom, -1)
			if len(rows) < 10 || rows[0][1] != "fits" {
				t.Errorf("%d recommendation rows, want the catalog with fitting ones first", len(rows))
			}

			f, err := os.Open(shotFile)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("screenshot %s: %v", shotFile, err)
			}
			n := countColors(img, map[string][3]int{
				"model": {0x3b, 0x82, 0xf6}, "context": {0x10, 0xb9, 0x81}, "compute": {0xf5, 0x9e, 0x0b},
				"overflow": {0xef, 0x44, 0x44},
			})
			t.Logf("%s: %v pixels by color (%s)", shotFile, n, img.Bounds().Size())
			for _, kind := range tt.drawn {
				if n[kind] < 2000 {
					t.Errorf("%d pixels of the %s color, want more than 2000: the bars are not drawn", n[kind], kind)
				}
			}
			if tt.notRed && n["overflow"] >= 2000 {
				t.Errorf("%d red pixels for a model that fits", n["overflow"])
			}
		})
	}
}

// checkCommand pins that the panel shows the plan as a command that runs
// when pasted (the API's, which is plan's), and says every size in GiB,
// as fit and plan do, never in MiB beside them.
func checkCommand(t *testing.T, base, model, dom string) {
	t.Helper()
	p := getJSON[planAnswer](t, base+"/api/plan?"+url.Values{"machine": {"rtx-4090"}, "model": {model}}.Encode())
	if p.Chosen != nil {
		want := `<code id="command">` + html.EscapeString(strings.Join(p.Command, " ")) + `</code>`
		if len(p.Command) < 3 || p.Command[1] != "-hf" || !strings.Contains(dom, want) {
			t.Errorf("the page lacks the plan's command %s", want)
		}
	}
	if m := mibFigure.FindString(dom); m != "" {
		t.Errorf("the page says %q: want every size in GiB", m)
	}
}

// checkPreset pins that the panel's controls started from the plan: the
// fit it drew asks for the plan's slots, context and GPU layers.
func checkPreset(t *testing.T, base, model, query string) {
	t.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	// The panel asks for the default slots, as the CLI plans them.
	p := getJSON[planAnswer](t, base+"/api/plan?"+url.Values{"machine": {"rtx-4090"}, "model": {model}}.Encode())
	slots := plan.DefaultSearch().Parallel
	want := url.Values{"model": {model}, "machine": {"rtx-4090"}, "ngl": {"all"}, "parallel": {strconv.Itoa(slots)}, "ctx": {strconv.Itoa(4096 * slots)}}
	if c := p.Chosen; c != nil {
		want.Set("parallel", strconv.Itoa(c.Profile.Parallel))
		want.Set("ctx", strconv.Itoa(c.CtxPerSlot*c.Profile.Parallel))
		want.Set("ngl", strconv.Itoa(c.GPULayers))
		want.Set("ctk", c.Profile.CacheK)
		want.Set("ctv", c.Profile.CacheV)
		want.Set("fa", string(c.Profile.FlashAttn))
	}
	for k := range want {
		if q.Get(k) != want.Get(k) {
			t.Errorf("the panel's fit asked %s=%q, want %q from the plan (query %s)", k, q.Get(k), want.Get(k), query)
		}
	}
}

// TestPlanCommand pins the command line the panel shows: the whole
// llama-server command, with the model named as llama.cpp downloads it
// (-hf and the catalog's reference), then the chosen flags, so that it
// runs as shown. Where nothing fits there is no command to show.
func TestPlanCommand(t *testing.T) {
	h := newTestHandler(t, nil)
	tests := []struct {
		model, machine, hf string // hf: the reference -hf must carry, none when nothing fits
	}{
		{"qwen3-8b/Q4_K_M", "rtx-4090", "unsloth/Qwen3-8B-GGUF:Q4_K_M"},
		{"qwen3-8b/Q4_K_M", "cpu-32", "unsloth/Qwen3-8B-GGUF:Q4_K_M"},
		{"gpt-oss-120b/MXFP4_MOE", "rtx-4090", "ggml-org/gpt-oss-120b-GGUF:MXFP4"},
		{"qwen3-235b-a22b/Q8_0", "cpu-32", ""},
	}
	for _, tt := range tests {
		t.Run(tt.model+"@"+tt.machine, func(t *testing.T) {
			q := url.Values{"model": {tt.model}, "machine": {tt.machine}}.Encode()
			status, _, body := do(t, h, "GET", "/api/plan?"+q, "", nil)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			got := decode[planAnswer](t, body)
			if tt.hf == "" {
				if got.Chosen != nil || got.Command != nil {
					t.Errorf("chosen %v, command %q: want neither where nothing fits", got.Chosen, got.Command)
				}
				return
			}
			if got.Chosen == nil {
				t.Fatalf("nothing chosen: %q", got.Explain)
			}
			want := append([]string{"llama-server", "-hf", tt.hf}, got.Chosen.Flags...)
			if !slices.Equal(got.Command, want) {
				t.Errorf("command %q, want %q", got.Command, want)
			}
		})
	}
}
