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

// A twin gets its embedding, norms and routers filled and every other
// weight, the experts among them, left a hole.
func TestRouteTwin(t *testing.T) {
	for _, tc := range []struct {
		shape string
	}{{"qwen3-30b-a3b"}, {"qwen3-0.6b"}} {
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
		if err := routeTwin(context.Background(), []string{path}); err != nil {
			t.Fatalf("%s: %v", tc.shape, err)
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
			want := !synth.RoutingTensor(ti.Name)
			if zero != want {
				t.Errorf("%s: %s is zero %v, want %v", tc.shape, ti.Name, zero, want)
			}
			if strings.Contains(ti.Name, "exps") && !zero {
				t.Errorf("%s: expert tensor %s was filled", tc.shape, ti.Name)
			}
		}
		f.Close()
	}
}
