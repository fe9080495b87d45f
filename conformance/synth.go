package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// Synth rebuilds the synthetic GGUF the case was measured on, with the
// current synth. Its header is all a prediction needs (the file's
// data region is a hole); Layout gives every tensor's name, type, shape and
// offset. Check CheckSynth first: a golden file measured on another header
// says nothing about this one.
func (c *Case) Synth() (*gguf.Builder, error) { return c.build(c.Inputs.Shape, c.Inputs.Quant) }

// build rebuilds one synth file of the case, by shape and quant.
func (c *Case) build(shape, quant string) (*gguf.Builder, error) {
	s, ok := synth.Lookup(shape)
	if !ok {
		return nil, fmt.Errorf("conformance: %s: synth has no shape %q", c.ID, shape)
	}
	q, err := synth.ParseQuant(quant)
	if err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", c.ID, err)
	}
	return synth.Build(s, q)
}

// DraftSynth rebuilds the case's -md draft model from synth
// (Profile.Draft, "shape:quant").
func (c *Case) DraftSynth() (*gguf.Builder, error) {
	shape, quant, ok := strings.Cut(c.Inputs.Profile.Draft, ":")
	if !ok {
		return nil, fmt.Errorf("conformance: %s: draft %q is not shape:quant", c.ID, c.Inputs.Profile.Draft)
	}
	return c.build(shape, quant)
}

// DraftPath is the -md file the case's llama-server ran with, as its
// command names it; "" without one.
func (c *Case) DraftPath() string {
	cmd := c.Inputs.Command
	for i := 0; i+1 < len(cmd); i++ {
		if cmd[i] == "-md" {
			return cmd[i+1]
		}
	}
	return ""
}

// HeaderDigest returns the sha256 (hex) of a builder's header bytes, padding
// included, and the size of the file it describes: what the harness records
// in inputs.file.
func HeaderDigest(b *gguf.Builder) (digest string, size int64, err error) {
	var hdr bytes.Buffer
	if err := b.WriteHeader(&hdr); err != nil {
		return "", 0, err
	}
	f, err := b.Layout()
	if err != nil {
		return "", 0, err
	}
	sum := sha256.Sum256(hdr.Bytes())
	return hex.EncodeToString(sum[:]), f.Size, nil
}

// CheckSynth reports an error when the current synth no longer produces the
// file the case was measured on, so the golden file is stale and must be
// regenerated (conformance/regen.sh).
func (c *Case) CheckSynth() error {
	b, err := c.Synth()
	if err != nil {
		return err
	}
	digest, size, err := HeaderDigest(b)
	if err != nil {
		return err
	}
	if digest != c.Inputs.File.HeaderSHA256 || size != c.Inputs.File.SizeBytes {
		return fmt.Errorf("conformance: %s: synth %s %s now writes a header with sha256 %s (%d bytes of file), the golden was measured on %s (%d): regenerate it",
			c.ID, c.Inputs.Shape, c.Inputs.Quant, digest[:12], size, c.Inputs.File.HeaderSHA256[:12], c.Inputs.File.SizeBytes)
	}
	return nil
}
