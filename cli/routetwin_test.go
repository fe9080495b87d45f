package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// A mixture-of-experts twin gets its embedding, norms and routers filled
// and its experts left zero; a dense twin is left as synth wrote it.
func TestRouteTwin(t *testing.T) {
	for _, tc := range []struct {
		shape  string
		routed bool
	}{{"qwen3-30b-a3b", true}, {"qwen3-0.6b", false}} {
		s, _ := synth.Lookup(tc.shape)
		s, err := s.FirstLayers(1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := synth.Build(s, synth.Q4_K_M)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "twin.gguf")
		if err := b.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		routed, err := routeTwin(context.Background(), []string{path})
		if err != nil || routed != tc.routed {
			t.Fatalf("%s: routed %v (%v), want %v", tc.shape, routed, err, tc.routed)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		h, err := gguf.Read(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range h.Tensors {
			buf := make([]byte, min(ti.Size, 1<<16))
			if _, err := f.ReadAt(buf, h.DataOffset+int64(ti.Offset)); err != nil {
				t.Fatal(err)
			}
			zero := bytes.Count(buf, []byte{0}) == len(buf)
			want := !(tc.routed && synth.RoutingTensor(ti.Name))
			if zero != want {
				t.Errorf("%s: %s is zero %v, want %v", tc.shape, ti.Name, zero, want)
			}
			if tc.routed && strings.Contains(ti.Name, "exps") && !zero {
				t.Errorf("%s: expert tensor %s was filled", tc.shape, ti.Name)
			}
		}
		f.Close()
	}
}
