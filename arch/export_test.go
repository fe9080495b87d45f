package arch

import (
	"fmt"

	"github.com/headroom-llm/headroom/gguf"
)

// FromGGUFPending reads a header of an architecture arch reads but does
// not model yet (pending), for the tests that hold its reading.
func FromGGUFPending(m *gguf.Model) (*Model, error) {
	name := m.Architecture()
	fam, ok := pending[name]
	if !ok {
		return nil, fmt.Errorf("%q is not pending", name)
	}
	return readModel(m, name, fam, true)
}
