package store

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// plainStep spaces the lines of a non-terminal bar for files of unknown
// size, where tenths cannot be told.
const plainStep = 1 << 30

// NewBar returns a Progress function that draws on w. On a terminal it
// keeps one line per file up to date with carriage returns, for example
//
//	Llama-3.1-8B-Q4_K_M.gguf  1.2 GiB / 4.6 GiB  26%  85.3 MiB/s  ETA 41s
//
// Elsewhere (a log, a pipe) it writes a plain line at every tenth of a file
// and when it is done, so logs stay readable. It draws only what it is
// given, so its output depends on the Progress values alone; it may be
// called from several goroutines.
func NewBar(w io.Writer, isTTY bool) func(Progress) {
	b := &bar{w: w, tty: isTTY}
	return b.draw
}

type bar struct {
	mu  sync.Mutex
	w   io.Writer
	tty bool
	// file identifies the file drawn last.
	file  string
	index int
	// width is the length of the line now on screen (terminal), open
	// says it still needs its newline.
	width int
	open  bool
	// mark is the last tenth (or plainStep) written for this file, and
	// phase the last phase (non-terminal).
	mark  int64
	phase Phase
}

func (b *bar) draw(p Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.File != b.file || p.Index != b.index {
		if b.open {
			io.WriteString(b.w, "\n")
		}
		b.file, b.index, b.width, b.open, b.mark, b.phase = p.File, p.Index, 0, false, -1, ""
	}
	final := p.Phase == PhaseDone || p.Phase == PhasePresent
	line := progressLine(p)
	if b.tty {
		pad := ""
		if n := b.width - len(line); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		io.WriteString(b.w, "\r"+line+pad)
		b.width, b.open = len(line), !final
		if final {
			io.WriteString(b.w, "\n")
			b.width = 0
		}
		return
	}
	if p.Phase == PhaseDownload {
		mark := int64(-1)
		switch {
		case p.Total > 0:
			mark = p.Done * 10 / p.Total
		case p.Total < 0:
			mark = p.Done / plainStep
		}
		// The last tenth is left to the final line.
		if (mark <= b.mark || (p.Total > 0 && mark >= 10)) && b.phase == PhaseDownload {
			return
		}
		b.mark = mark
	} else if p.Phase == b.phase && !final {
		return
	}
	b.phase = p.Phase
	io.WriteString(b.w, line+"\n")
}

// progressLine renders one Progress without line breaks.
func progressLine(p Progress) string {
	var s strings.Builder
	if p.Count > 1 {
		fmt.Fprintf(&s, "[%d/%d] ", p.Index, p.Count)
	}
	s.WriteString(p.File)
	switch p.Phase {
	case PhaseWait:
		s.WriteString("  waiting for another download of this file")
	case PhaseVerify:
		fmt.Fprintf(&s, "  checking %s already downloaded  %s", formatBytes(p.Resumed), percent(p.Done, p.Resumed))
	case PhasePresent:
		fmt.Fprintf(&s, "  %s  already present", formatBytes(p.Total))
	case PhaseDone:
		fmt.Fprintf(&s, "  %s  done", formatBytes(p.Total))
	default:
		if p.Total >= 0 {
			fmt.Fprintf(&s, "  %s / %s  %s", formatBytes(p.Done), formatBytes(p.Total), percent(p.Done, p.Total))
		} else {
			fmt.Fprintf(&s, "  %s", formatBytes(p.Done))
		}
		if p.Rate > 0 {
			fmt.Fprintf(&s, "  %s/s", formatBytes(int64(p.Rate)))
		}
		if p.ETA > 0 {
			fmt.Fprintf(&s, "  ETA %s", formatETA(p.ETA))
		}
	}
	return s.String()
}

// percent rounds down, so 100% means complete.
func percent(done, total int64) string {
	if total <= 0 {
		return "100%"
	}
	return fmt.Sprintf("%d%%", min(done, total)*100/total)
}

// formatBytes writes a size in binary units with one decimal.
func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= 1024
		if v < 1024 || unit == "TiB" {
			return fmt.Sprintf("%.1f %s", v, unit)
		}
	}
	return ""
}

// formatETA writes a duration to the second, as 41s, 3m05s or 1h02m.
func formatETA(d time.Duration) string {
	s := int64((d + time.Second/2) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
}
