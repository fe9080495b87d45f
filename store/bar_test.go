package store

import (
	"strings"
	"testing"
	"time"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

func TestBar(t *testing.T) {
	name := "Llama-3.1-8B-Q4_K_M.gguf"
	dl := func(done, total int64, rate float64, eta time.Duration) Progress {
		return Progress{File: name, Index: 1, Count: 1, Phase: PhaseDownload, Done: done, Total: total, Rate: rate, ETA: eta}
	}
	done := Progress{File: name, Index: 1, Count: 1, Phase: PhaseDone, Done: 4938 * mib, Total: 4938 * mib}
	tests := []struct {
		name  string
		tty   bool
		calls []Progress
		want  string
	}{
		{
			name:  "terminal line",
			tty:   true,
			calls: []Progress{dl(1229*mib, 4710*mib, 85.3*mib, 41*time.Second)},
			want:  "\rLlama-3.1-8B-Q4_K_M.gguf  1.2 GiB / 4.6 GiB  26%  85.3 MiB/s  ETA 41s",
		},
		{
			name: "terminal redraws in place, pads shorter lines, ends with a newline",
			tty:  true,
			calls: []Progress{
				dl(10*mib, 4938*mib, 0, 0),
				dl(4937*mib, 4938*mib, 100*mib, 0),
				done,
			},
			want: "\rLlama-3.1-8B-Q4_K_M.gguf  10.0 MiB / 4.8 GiB  0%" +
				"\rLlama-3.1-8B-Q4_K_M.gguf  4.8 GiB / 4.8 GiB  99%  100.0 MiB/s" +
				"\rLlama-3.1-8B-Q4_K_M.gguf  4.8 GiB  done" + strings.Repeat(" ", 22) + "\n",
		},
		{
			name: "terminal starts a new line for the next file",
			tty:  true,
			calls: []Progress{
				{File: "a-00001-of-00002.gguf", Index: 1, Count: 2, Phase: PhaseDownload, Done: 512, Total: 2048},
				{File: "a-00002-of-00002.gguf", Index: 2, Count: 2, Phase: PhasePresent, Done: 2048, Total: 2048},
			},
			want: "\r[1/2] a-00001-of-00002.gguf  512 B / 2.0 KiB  25%\n" +
				"\r[2/2] a-00002-of-00002.gguf  2.0 KiB  already present\n",
		},
		{
			name: "log prints every tenth and the end",
			tty:  false,
			calls: []Progress{
				dl(0, 100*mib, 0, 0),
				dl(5*mib, 100*mib, 0, 0),
				dl(9*mib, 100*mib, 0, 0),
				dl(12*mib, 100*mib, 2*mib, 44*time.Second),
				dl(15*mib, 100*mib, 0, 0),
				dl(35*mib, 100*mib, 0, 0),
				dl(100*mib, 100*mib, 0, 0),
				{File: name, Index: 1, Count: 1, Phase: PhaseDone, Done: 100 * mib, Total: 100 * mib},
			},
			want: "Llama-3.1-8B-Q4_K_M.gguf  0 B / 100.0 MiB  0%\n" +
				"Llama-3.1-8B-Q4_K_M.gguf  12.0 MiB / 100.0 MiB  12%  2.0 MiB/s  ETA 44s\n" +
				"Llama-3.1-8B-Q4_K_M.gguf  35.0 MiB / 100.0 MiB  35%\n" +
				"Llama-3.1-8B-Q4_K_M.gguf  100.0 MiB  done\n",
		},
		{
			name: "log of unknown size prints every GiB",
			tty:  false,
			calls: []Progress{
				dl(0, -1, 0, 0),
				dl(512*mib, -1, 0, 0),
				dl(gib+1, -1, 0, 0),
				dl(gib+2, -1, 0, 0),
			},
			want: "Llama-3.1-8B-Q4_K_M.gguf  0 B\n" +
				"Llama-3.1-8B-Q4_K_M.gguf  1.0 GiB\n",
		},
		{
			name: "log of wait, resume check and present",
			tty:  false,
			calls: []Progress{
				{File: "m.gguf", Index: 1, Count: 1, Phase: PhaseWait, Total: 10},
				{File: "m.gguf", Index: 1, Count: 1, Phase: PhaseWait, Total: 10},
				{File: "m.gguf", Index: 1, Count: 1, Phase: PhasePresent, Done: 10, Total: 10},
				{File: "n.gguf", Index: 1, Count: 1, Phase: PhaseVerify, Done: 0, Total: 4 * gib, Resumed: 2 * gib},
				{File: "n.gguf", Index: 1, Count: 1, Phase: PhaseVerify, Done: gib, Total: 4 * gib, Resumed: 2 * gib},
			},
			want: "m.gguf  waiting for another download of this file\n" +
				"m.gguf  10 B  already present\n" +
				"n.gguf  checking 2.0 GiB already downloaded  0%\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			draw := NewBar(&out, tt.tty)
			for _, p := range tt.calls {
				draw(p)
			}
			if out.String() != tt.want {
				t.Errorf("output\n%q\nexpected\n%q", out.String(), tt.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	bytes := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{85*mib + 300*1024, "85.3 MiB"}, {4938 * mib, "4.8 GiB"}, {3 << 40, "3.0 TiB"}, {2048 << 40, "2048.0 TiB"},
	}
	for _, tt := range bytes {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, expected %q", tt.n, got, tt.want)
		}
	}
	etas := []struct {
		d    time.Duration
		want string
	}{
		{400 * time.Millisecond, "0s"}, {41 * time.Second, "41s"}, {185 * time.Second, "3m05s"}, {3720 * time.Second, "1h02m"},
	}
	for _, tt := range etas {
		if got := formatETA(tt.d); got != tt.want {
			t.Errorf("formatETA(%v) = %q, expected %q", tt.d, got, tt.want)
		}
	}
}

func TestMeter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var m meter
	if r := m.rate(t0, 0); r != 0 {
		t.Errorf("rate without samples = %v, expected 0", r)
	}
	// 1 MiB/s for 10 s, then 4 MiB/s for 10 s; the rate follows the last
	// few seconds, not the average.
	var n int64
	for i := 0; i <= 200; i++ {
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if i > 0 {
			if i <= 100 {
				n += mib / 10
			} else {
				n += 4 * mib / 10
			}
		}
		m.add(at, n)
		if i == 100 {
			if r := m.rate(at, n); r < 0.99*mib || r > 1.01*mib {
				t.Errorf("rate after 10 s at 1 MiB/s = %.0f", r)
			}
		}
	}
	if r := m.rate(t0.Add(20*time.Second), n); r < 3.99*mib || r > 4.01*mib {
		t.Errorf("rate after 10 s at 4 MiB/s = %.0f, expected 4 MiB/s", r)
	}
	if len(m.samples) > int(rateWindow/progressEvery)+2 {
		t.Errorf("meter keeps %d samples, expected those of the window only", len(m.samples))
	}
	// A restart clears the history instead of giving a negative rate.
	m.add(t0.Add(20*time.Second+100*time.Millisecond), 10)
	if r := m.rate(t0.Add(20*time.Second+300*time.Millisecond), 10); r != 0 {
		t.Errorf("rate after a restart = %v, expected 0", r)
	}
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-0/1", 0, 1, true},
		{"bytes 5-9/*", 5, -1, true},
		{"bytes 100-199/150", 0, 0, false},
		{"bytes 9-5/20", 0, 0, false},
		{"bytes */200", 0, 0, false},
		{"items 1-2/3", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		start, total, ok := parseContentRange(tt.in)
		if ok != tt.ok || (ok && (start != tt.start || total != tt.total)) {
			t.Errorf("parseContentRange(%q) = %d, %d, %v; expected %d, %d, %v", tt.in, start, total, ok, tt.start, tt.total, tt.ok)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://cdn.example/a/m.gguf?X-Amz-Signature=abc&x=1", "https://cdn.example/a/m.gguf"},
		{"https://user:pw@host/m.gguf#frag", "https://host/m.gguf"},
		{"https://host/m.gguf", "https://host/m.gguf"},
		{"%zz?sig=abc", "%zz"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, expected %q", tt.in, got, tt.want)
		}
	}
}
