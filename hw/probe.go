package hw

import (
	"bytes"
	"context"
	"fmt"
	"github.com/headroom-llm/headroom/internal/lookpath"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Runner runs the external programs the probes ask (nvidia-smi, sysctl,
// vm_stat, llama-server). Tests replace it with recorded outputs.
type Runner interface {
	// LookPath reports where a program is, as exec.LookPath does.
	LookPath(file string) (string, error)
	// Output runs a program to completion and returns what it wrote.
	Output(ctx context.Context, name string, args ...string) (stdout, stderr []byte, err error)
}

// ExecRunner runs real programs, each bounded by Timeout.
type ExecRunner struct {
	// Timeout bounds one program; zero means 20 s, enough for
	// llama-server to initialise every backend it was built with.
	Timeout time.Duration
}

// LookPath implements Runner with lookpath.LookPath: a program found
// only through a relative PATH entry is not run.
func (ExecRunner) LookPath(file string) (string, error) { return lookpath.LookPath(file) }

// Output implements Runner with os/exec.
func (r ExecRunner) Output(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.Bytes(), stderr.Bytes(), err
}

// ProbeOptions are the inputs of Probe. The zero value probes this machine.
type ProbeOptions struct {
	// Root is the filesystem the probes read /proc and /sys from, rooted at
	// "/" (paths are "proc/meminfo", "sys/class/drm"). Nil means the real
	// root; tests pass a recorded tree.
	Root fs.FS
	// Runner runs external programs; nil means ExecRunner{}.
	Runner Runner
	// GOOS selects the probes; empty means runtime.GOOS.
	GOOS string
	// Host names the machine; empty means os.Hostname.
	Host string
	// Now stamps the snapshot; zero means time.Now().
	Now time.Time
	// LlamaServer is the llama-server program asked for --list-devices, the
	// native evidence of what the engine will see. Empty means
	// "llama-server" on PATH; "-" skips it.
	LlamaServer string
	// MeasureBandwidth, when set, is called for a system or unified
	// domain whose bandwidth no specification gave (MeasureBandwidth in
	// this package is the real one); nil leaves it unknown.
	MeasureBandwidth func(context.Context) (gbps float64, how string, err error)
	// Bandwidth, when set, keeps measured bandwidths between runs, keyed
	// by the hardware (Hardware): a machine is measured once, and two
	// runs on it plan with the same figure. Nil measures every time.
	Bandwidth BandwidthStore
	// Remeasure measures again even when Bandwidth holds a figure for
	// this hardware, and keeps the higher of the two: a busy machine
	// measures low, never high.
	Remeasure bool
}

// BandwidthStore keeps bandwidth measurements by hardware key.
type BandwidthStore interface {
	Load(hardware string) (Measured, bool)
	Save(hardware string, m Measured)
}

// Measured is one bandwidth measurement: the figure, how it was taken and
// when.
type Measured struct {
	GBps float64   `json:"gbps"`
	How  string    `json:"how"`
	When time.Time `json:"when"`
}

// Probe takes a snapshot of this machine. Each probe is small and
// independent: one that finds nothing or fails adds a note to the snapshot
// and the others carry on. Probe fails only when it cannot learn the size of
// system memory, without which no plan can be made.
func Probe(ctx context.Context, opts ProbeOptions) (*Snapshot, error) {
	if opts.Root == nil {
		opts.Root = os.DirFS("/")
	}
	if opts.Runner == nil {
		opts.Runner = ExecRunner{}
	}
	if opts.GOOS == "" {
		opts.GOOS = runtime.GOOS
	}
	if opts.Host == "" {
		opts.Host, _ = os.Hostname()
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.LlamaServer == "" {
		opts.LlamaServer = "llama-server"
	}
	m := &machine{}
	var err error
	switch opts.GOOS {
	case "linux":
		err = probeLinux(ctx, opts, m)
	case "darwin":
		err = probeDarwin(ctx, opts, m)
	default:
		err = fmt.Errorf("hw: probing %s is not implemented; describe the machine with a preset or a file (--machine)", opts.GOOS)
	}
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts.LlamaServer != "-" {
		m.native = probeNative(ctx, opts.Runner, opts.LlamaServer, m)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	s := m.assemble()
	s.Host, s.Taken, s.Hardware = opts.Host, opts.Now.UTC().Truncate(time.Second), m.hardware()
	if opts.MeasureBandwidth != nil {
		for i := range s.Domains {
			d := &s.Domains[i]
			if d.BandwidthGBps != 0 || (d.Kind != KindSystem && d.Kind != KindUnified) {
				continue
			}
			got, err := measure(ctx, opts, m.hardware()+" domain "+d.ID)
			if err != nil {
				s.Notes = append(s.Notes, fmt.Sprintf("%s bandwidth unknown: %v", d.ID, err))
				continue
			}
			d.BandwidthGBps, d.BandwidthSource = got.GBps, got.How
		}
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("hw: the probed snapshot is inconsistent (a bug): %w", err)
	}
	return s, nil
}

// measure returns the kept measurement for this hardware, or measures and
// keeps it. The figure a run plans with is then the same run after run,
// where a fresh measurement moves by tens of percent with what else the
// machine is doing.
func measure(ctx context.Context, opts ProbeOptions, hardware string) (Measured, error) {
	kept := func(m Measured) Measured {
		m.How = fmt.Sprintf("%s, on %s (kept until the hardware changes; --remeasure measures again)", m.How, m.When.Format("2006-01-02"))
		return m
	}
	var old Measured
	if opts.Bandwidth != nil {
		if got, ok := opts.Bandwidth.Load(hardware); ok && got.GBps > 0 {
			if !opts.Remeasure {
				return kept(got), nil
			}
			old = got
		}
	}
	gbps, how, err := opts.MeasureBandwidth(ctx)
	if err != nil {
		return Measured{}, err
	}
	got := Measured{GBps: float64(int(gbps*10)) / 10, How: how, When: opts.Now.UTC().Truncate(time.Second)}
	if opts.Bandwidth == nil {
		return got, nil
	}
	// Other work on the machine can only slow a measurement down: a
	// figure taken while the cores were busy is low, never high (14.7 to
	// 18.5 GB/s kept on 2-core VMs of the kind that read 36 to 53 idle:
	// docs/speed.md). So a new measurement replaces the kept one only
	// when it is higher.
	if old.GBps >= got.GBps {
		got = old
	}
	opts.Bandwidth.Save(hardware, got)
	return kept(got), nil
}

// hardware names what a bandwidth measurement depends on: the CPU, the
// size of system memory and the GPUs. A change to any of them (a new
// DIMM, another card) makes a new key, and so a new measurement.
func (m *machine) hardware() string {
	parts := []string{"cpu " + m.host.cpu, fmt.Sprintf("ram %d", m.host.total)}
	for _, g := range m.gpus {
		parts = append(parts, fmt.Sprintf("gpu %s %s %d", g.vendor, g.name, g.total))
	}
	return strings.Join(parts, "; ")
}

// machine is what the probes found, before it is shaped into a snapshot.
type machine struct {
	host   hostMemory
	gpus   []*gpu
	native *nativeList // nil when llama-server was not asked or did not answer
	notes  []string
}

func (m *machine) notef(format string, args ...any) {
	m.notes = append(m.notes, fmt.Sprintf(format, args...))
}

// hostMemory is system memory as the operating system reports it.
type hostMemory struct {
	total int64
	avail *int64 // nil when not observed
	// cpuFree is what ggml's CPU backend reports as free: on Linux all of
	// RAM ("free system memory is ill-defined"); nil where it differs.
	cpuFree  *int64
	limit    int64 // a cgroup or similar limit below total; 0 for none
	swap     int64
	cpu      string   // the CPU's name, for the CPU view's description
	features []string // its instruction sets, as cpuFeatures names them
	source   string
}

// gpu is one physical GPU as a vendor probe found it.
type gpu struct {
	vendor    string // nvidia, amd, intel, apple
	index     int    // the vendor tool's index (nvidia-smi's)
	name      string
	busID     string // PCI address, "0000:01:00.0"; empty when unknown
	total     int64  // its own memory (VRAM), 0 when not reported
	free      *int64
	unified   bool  // it draws from system memory
	usable    int64 // for unified GPUs: the share it may use (GTT, working set); 0 unknown
	carveout  int64 // for APUs: the BIOS carve-out, memory the OS does not count in RAM
	carveFree int64
	processes []Process
	source    string
	physical  string // the PhysicalID its views get; set by assemble
}
