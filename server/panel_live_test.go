package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// devtools speaks the DevTools protocol with a headless Chromium over
// --remote-debugging-pipe: JSON messages separated by NUL bytes, the
// browser reading fd 3 and writing fd 4. No websocket is needed.
type devtools struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	mu      sync.Mutex
	next    int
	replies map[int]chan json.RawMessage
	session string
}

// startDevtools starts the browser with extra flags added to the usual
// headless ones.
func startDevtools(t *testing.T, bin string, extra ...string) *devtools {
	t.Helper()
	toBrowser, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, fromBrowser, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// The profile is removed after the browser has closed (its helper
	// processes write to it until then), so not through t.TempDir.
	profile, err := os.MkdirTemp("", "headroom-panel-")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profile, "--window-size=1280,1100", "--remote-debugging-pipe"}, extra...)
	cmd := exec.Command(bin, append(args, "about:blank")...)
	cmd.ExtraFiles = []*os.File{toBrowser, fromBrowser} // fd 3 and fd 4
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toBrowser.Close()
	fromBrowser.Close()
	d := &devtools{cmd: cmd, in: in, replies: map[int]chan json.RawMessage{}}
	t.Cleanup(func() {
		// Browser.close ends every helper process too; killing is the
		// fallback for a browser that does not answer.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.mu.Lock()
		d.session = ""
		d.mu.Unlock()
		d.call(ctx, "Browser.close", map[string]any{})
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		in.Close()
		os.RemoveAll(profile)
	})
	go func() {
		r := bufio.NewReader(out)
		for {
			msg, err := r.ReadBytes(0)
			if err != nil {
				return
			}
			var m struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
				continue // an event
			}
			if m.Error != nil {
				m.Result = json.RawMessage(`{"error":` + string(m.Error) + `}`)
			}
			d.mu.Lock()
			ch := d.replies[m.ID]
			d.mu.Unlock()
			if ch != nil {
				ch <- m.Result
			}
		}
	}()
	return d
}

// call sends one command (to the attached page once there is a session)
// and waits for its reply.
func (d *devtools) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	d.mu.Lock()
	d.next++
	id := d.next
	ch := make(chan json.RawMessage, 1)
	d.replies[id] = ch
	msg := map[string]any{"id": id, "method": method, "params": params}
	if d.session != "" && !strings.HasPrefix(method, "Target.") {
		msg["sessionId"] = d.session
	}
	d.mu.Unlock()
	b, _ := json.Marshal(msg)
	if _, err := d.in.Write(append(b, 0)); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if strings.HasPrefix(string(r), `{"error":`) {
			return nil, fmt.Errorf("%s: %s", method, r)
		}
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// open opens url in a new page and sends later commands to it.
func (d *devtools) open(ctx context.Context, url string) error {
	r, err := d.call(ctx, "Target.createTarget", map[string]any{"url": url})
	if err != nil {
		return err
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	json.Unmarshal(r, &target)
	r, err = d.call(ctx, "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true})
	if err != nil {
		return err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(r, &att)
	d.mu.Lock()
	d.session = att.SessionID
	d.mu.Unlock()
	return nil
}

// eval runs a script in the page and returns its value as JSON.
func (d *devtools) eval(ctx context.Context, script string) (json.RawMessage, error) {
	r, err := d.call(ctx, "Runtime.evaluate", map[string]any{"expression": script, "returnByValue": true, "awaitPromise": true})
	if err != nil {
		return nil, err
	}
	var v struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception json.RawMessage `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(r, &v); err != nil {
		return nil, err
	}
	if v.Exception != nil {
		return nil, fmt.Errorf("script failed: %s", v.Exception)
	}
	return v.Result.Value, nil
}

// waitFor polls a script until it returns true.
func (d *devtools) waitFor(ctx context.Context, script string) error {
	for {
		v, err := d.eval(ctx, script)
		if err != nil {
			return err
		}
		if string(v) == "true" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", script, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestPanelReplansLive changes the slots and context controls as a person
// would (typing into the inputs) and checks that the panel asked /api/fit
// for the new profile and drew what the API answers for it.
func TestPanelReplansLive(t *testing.T) {
	bin := findChromium(t)
	srv := httptest.NewServer(newTestHandler(t, nil))
	t.Cleanup(srv.Close)
	getJSON[recommendAnswer](t, srv.URL+"/api/recommend?machine=rtx-4090")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d := startDevtools(t, bin)
	if err := d.open(ctx, srv.URL+"/?machine=rtx-4090&model=qwen3-8b/Q4_K_M"); err != nil {
		t.Fatal(err)
	}
	// Chromium may still be swapping about:blank for the panel when the
	// first evaluation runs, so wait for the panel's own element as well as
	// its ready mark, in one expression against one document.
	if err := d.waitFor(ctx, `document.body?.dataset.ready === "1" && !!document.getElementById("assessment")?.dataset.query`); err != nil {
		t.Fatal(err)
	}
	before, err := d.eval(ctx, `document.getElementById("assessment")?.dataset.query ?? ""`)
	if err != nil {
		t.Fatal(err)
	}
	// Three slots of 8192 cells, typed into the controls.
	if _, err := d.eval(ctx, `(() => {
		for (const [id, v] of [["slots", "3"], ["ctx", "8192"]]) {
			const e = document.getElementById(id);
			e.value = v;
			e.dispatchEvent(new Event("input", {bubbles: true}));
		}
		return true;
	})()`); err != nil {
		t.Fatal(err)
	}
	// The panel waits 150 ms after the last keystroke; 15 s is plenty.
	replan, stop := context.WithTimeout(ctx, 15*time.Second)
	defer stop()
	if err := d.waitFor(replan, `(document.getElementById("assessment")?.dataset.query || "").includes("parallel=3")`); err != nil {
		t.Fatalf("the panel did not re-plan for 3 slots (query before: %s): %v", before, err)
	}
	raw, err := d.eval(ctx, `JSON.stringify({q: document.getElementById("assessment").dataset.query,
		segs: [...document.querySelectorAll("#assessment .seg")].map(s => [s.dataset.domain, s.dataset.kind, s.dataset.bytes])})`)
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		Q    string     `json:"q"`
		Segs [][]string `json:"segs"`
	}
	var s string
	json.Unmarshal(raw, &s)
	if err := json.Unmarshal([]byte(s), &shown); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown.Q, "ctx=24576") {
		t.Errorf("query %q: want 3 slots of 8192 cells (ctx=24576)", shown.Q)
	}
	a := getJSON[fitAnswer](t, srv.URL+"/api/fit?"+shown.Q)
	want := map[string]string{}
	for _, dom := range a.Domains {
		for kind, n := range map[string]int64{"model": dom.Model, "context": dom.Context, "compute": dom.Compute, "auxiliary": dom.Auxiliary} {
			want[dom.ID+"/"+kind] = fmt.Sprint(n)
		}
	}
	if len(shown.Segs) == 0 {
		t.Fatal("no segments drawn after the re-plan")
	}
	for _, sg := range shown.Segs {
		if want[sg[0]+"/"+sg[1]] != sg[2] {
			t.Errorf("segment %s/%s shows %s bytes, the API says %s for %s", sg[0], sg[1], sg[2], want[sg[0]+"/"+sg[1]], shown.Q)
		}
	}
	if a.Profile.Parallel != 3 {
		t.Errorf("the re-planned profile has %d slots, want 3", a.Profile.Parallel)
	}
}
