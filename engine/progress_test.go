package engine

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine/enginetest"
)

func TestRouterLine(t *testing.T) {
	for _, tt := range []struct {
		line   string
		router bool
		want   *LoadProgress
	}{
		{`cmd_child_to_router:state:{"state":"loading","payload":{"stages":["text_model"],"current":"text_model","value":0.3757621645927429}}`, true, &LoadProgress{"text_model", 0.3757621645927429}},
		{`cmd_child_to_router:state:{"state":"loading","payload":{"stage":"mmproj_model"}}`, true, &LoadProgress{"mmproj_model", -1}},
		{`cmd_child_to_router:state:{"state":"loading","payload":{"current":"text_model","value":7}}`, true, &LoadProgress{"text_model", 1}},
		{`cmd_child_to_router:state:{"state":"ready","payload":{"id":"m"}}`, true, &LoadProgress{StageLoaded, 1}},
		{`cmd_child_to_router:state:{"state":"sleeping","payload":{}}`, true, nil},
		{`cmd_child_to_router:state:{not json`, true, nil},
		{`0.03.180.491 I srv  llama_server: model loaded`, false, nil},
	} {
		p, ok := routerLine(tt.line)
		if ok != tt.router || !reflect.DeepEqual(p, tt.want) {
			t.Errorf("%q: %+v %v, want %+v %v", tt.line, p, ok, tt.want, tt.router)
		}
	}
}

func FuzzRouterLine(f *testing.F) {
	f.Add(`cmd_child_to_router:state:{"state":"loading","payload":{"current":"text_model","value":0.5}}`)
	f.Add(`cmd_child_to_router:state:{"state":"loading","payload":{"value":-3e400}}`)
	f.Fuzz(func(t *testing.T, line string) {
		p, ok := routerLine(line)
		if !ok && p != nil {
			t.Fatal("progress from a line that is no router message")
		}
		if p != nil && p.Value != -1 && (p.Value < 0 || p.Value > 1) {
			t.Fatalf("value %v out of [0, 1]", p.Value)
		}
	})
}

// TestStartReportsProgress starts the stand-in as a router's child: its
// progress reaches OnProgress and not the log, and it keeps running
// while Start holds its input open.
func TestStartReportsProgress(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []LoadProgress
	var tee enginetest.Buffer
	s := startFake(t, Options{Log: &tee, OnProgress: func(p LoadProgress) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p)
	}}, "good")
	if err := s.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want := []LoadProgress{{"text_model", 0}, {"text_model", 0.5}, {"text_model", 1}, {StageLoaded, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("progress %+v, want %+v", got, want)
	}
	mu.Unlock()
	if strings.Contains(tee.String(), routerStatePrefix) {
		t.Errorf("the router's lines reached the log:\n%s", tee.String())
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case <-s.Exited():
		t.Fatalf("the server exited while its input was open:\n%s", tee.String())
	default:
	}
	// Stopped, it is told on its input, not signalled (as llama-server's
	// router does), and exits well within the grace period.
	stopWellWithinGrace(t, s, "a ready child")
	if s.exitCode != 0 {
		t.Errorf("exit code %d, want 0 (a clean stop)", s.exitCode)
	}
	if strings.Contains(tee.String(), "a signal reached") {
		t.Errorf("the ready child was signalled:\n%s", tee.String())
	}
}

// TestStopWhileRouterChildLoads: a router's child reads its input only
// once loaded, so one stopped while it loads is signalled, and ends long
// before its load would have.
func TestStopWhileRouterChildLoads(t *testing.T) {
	t.Parallel()
	s := startFake(t, Options{OnProgress: func(LoadProgress) {}}, "good", "FAKE_LLAMA_LOAD_MS=20000")
	time.Sleep(300 * time.Millisecond)
	stopWellWithinGrace(t, s, "a child loading for 20 s")
}

// stopWellWithinGrace stops s and fails unless it took under half the
// grace period: the child left on its own, not by the SIGKILL.
func stopWellWithinGrace(t *testing.T, s *Server, what string) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > DefaultGrace/2 {
		t.Errorf("stopping %s took %s, the grace period being %s", what, took, DefaultGrace)
	}
}
