package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/term"
)

func runHW(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "hw", "[flags]", `
Prints the machine as headroom plans against it: its physical memory domains
(system RAM, each discrete GPU's own memory, or one unified pool that CPU and
GPU share) and the device views llama.cpp names (CPU, CUDA0, Vulkan0, MTL0,
ROCm0, ...), each bound to the domain it draws from.

"Fits" is a statement about these domains, never about a total: a 24 GB card
beside 64 GB of RAM is two domains that a model's layers are split across,
while a 128 GB Mac is one pool of which Metal may use about three quarters.
For each domain you see its capacity, what is free now, the share a backend
may use (Metal's working set, an APU's GTT limit, a cgroup limit), its
bandwidth, and where each figure came from. Swap is noted, never counted.
Memory a desktop session holds on a GPU (the compositor, a browser) is
reported where the driver tells it, with what running headless would recover.

What is probed: /proc/meminfo and cgroup limits (Linux), nvidia-smi (memory
and the processes holding it; a GB10's [N/A] means unified memory), amdgpu
and Intel sysfs, sysctl and vm_stat (macOS). With llama-server on PATH, its
--list-devices answer names the devices as your build does and gives the
memory llama.cpp's --fit will read; without it, names are inferred.

Presets describe machines you do not have, for what-if planning. A snapshot
saved with --json can be edited and read back with --machine FILE.

When one box is not enough, llama.cpp's RPC backend lends it the devices of
other hosts running rpc-server. Save 'headroom hw --json' on each such host,
then join them here with --rpc: the result is a machine file whose remote
devices are named as llama-server --rpc names them (RPC0, RPC1, ...), each
host's memory a domain of its own. 'headroom plan --machine joined.json'
then splits layers over them and prints --rpc and -ts.

Examples:
  headroom hw
  headroom hw --json > box.json
  headroom hw --machine m4-max-128
  headroom hw --machine box.json
  headroom hw --presets
  headroom hw --rpc 10.0.0.2:50052=gpu-box.json --json > joined.json
  headroom hw --rpc 10.0.0.2:50052 --json > joined.json   # ask the rpc-server itself`)
	asJSON := fs.Bool("json", false, "print the snapshot as JSON, the shape --machine FILE reads")
	machine := fs.String("machine", "", "show a preset (see --presets) or a machine `FILE` instead of probing")
	remeasure := fs.Bool("remeasure", false, "measure this machine's memory bandwidth again instead of using the figure kept from the first measurement")
	presets := fs.Bool("presets", false, "list the built-in presets, one a line")
	llama := fs.String("llama-server", "", "llama-server `program` asked for --list-devices (default: llama-server on PATH; - skips it)")
	var remotes []string
	fs.Func("rpc", "join a host running rpc-server: `HOST:PORT[=FILE]`, FILE its 'headroom hw --json'; without FILE the rpc-server is asked itself (repeat, in --rpc order)", func(v string) error {
		remotes = append(remotes, v)
		return nil
	})
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %q (a preset or file goes after --machine)", strings.Join(pos, " "))
	}
	if *presets {
		n := 0
		for _, p := range hw.Presets() {
			n = max(n, len(p.Name))
		}
		for _, p := range hw.Presets() {
			head := fmt.Sprintf("%-*s  ", n, p.Name)
			fmt.Fprintln(env.Stdout, wrap(p.Summary, head, strings.Repeat(" ", len(head)), textWidth))
		}
		return nil
	}
	if *remeasure && *machine != "" {
		return usagef("--remeasure measures this machine; --machine %s is described, not measured", *machine)
	}
	var s *hw.Snapshot
	if *machine != "" {
		s, err = hw.LoadMachine(*machine)
	} else {
		s, err = env.probe(ctx, probeOptions(env, *llama, *remeasure))
	}
	if err != nil {
		return err
	}
	if len(remotes) > 0 {
		if s, err = joinRemotes(ctx, s, remotes); err != nil {
			return err
		}
	}
	if *asJSON {
		return s.WriteJSON(env.Stdout)
	}
	printHW(env.Stdout, s)
	return nil
}

func printHW(w io.Writer, s *hw.Snapshot) {
	switch s.Source {
	case hw.SourcePreset:
		fmt.Fprintf(w, "machine  preset %s\n", term.Text(s.Preset))
	default:
		title := s.Host
		if title == "" && s.Preset != "" {
			title = "preset " + s.Preset
		}
		if title == "" {
			title = "(unnamed)"
		}
		when := ""
		if !s.Taken.IsZero() {
			when = ", " + s.Taken.Format("2006-01-02 15:04 MST")
		}
		// A machine file is anyone's JSON: every name in it is escaped.
		fmt.Fprintf(w, "machine  %s (%s%s)\n", term.Text(title), term.Text(string(s.Source)), when)
	}

	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tKIND\tCAPACITY\tFREE\tUSABLE\tBANDWIDTH\tVIEWS")
	for _, d := range s.Domains {
		free := "-"
		if d.Free != nil {
			free = bytesIEC(*d.Free)
		}
		usable := d.Capacity
		if d.Usable > 0 {
			usable = d.Usable
		}
		bw := "-"
		if d.BandwidthGBps > 0 {
			bw = fmt.Sprintf("%g GB/s", d.BandwidthGBps)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", term.Text(d.ID), term.Text(string(d.Kind)), bytesIEC(d.Capacity), free, bytesIEC(usable), bw,
			term.Text(orDash(strings.Join(s.Views(d.ID), " "))))
	}
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tBACKEND\tTYPE\tDOMAIN\tTOTAL\tFREE\tHOST BUFFER\tDESCRIPTION")
	for _, d := range s.Devices {
		total, free := "-", "-"
		if d.Total > 0 {
			total = bytesIEC(d.Total)
		}
		if d.Free != nil {
			free = bytesIEC(*d.Free)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", term.Text(d.Name), term.Text(d.Backend), term.Text(string(d.Type)), term.Text(d.Domain), total, free,
			term.Text(orDash(d.HostBuffer)), term.Text(orDash(d.Description)))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nsources")
	for _, d := range s.Domains {
		fmt.Fprintln(w, wrap(term.Text(d.Source), "  "+term.Text(d.ID)+": ", "      ", textWidth))
		if d.BandwidthSource != "" {
			fmt.Fprintln(w, wrap(term.Text(d.BandwidthSource), "  "+term.Text(d.ID)+" bandwidth: ", "      ", textWidth))
		}
	}
	if len(s.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes")
		for _, n := range s.Notes {
			fmt.Fprintln(w, wrap(term.Text(n), "  - ", "    ", textWidth))
		}
	}
}

// rpcProbeTimeout bounds one rpc-server's answers: it serves one client at
// a time, and one busy with a llama-server does not answer at all.
const rpcProbeTimeout = 10 * time.Second

// joinRemotes reads each HOST:PORT=FILE, or asks each HOST:PORT's
// rpc-server, and joins the hosts to s.
func joinRemotes(ctx context.Context, s *hw.Snapshot, specs []string) (*hw.Snapshot, error) {
	var remotes []hw.Remote
	for _, spec := range specs {
		endpoint, file, ok := strings.Cut(spec, "=")
		if !ok {
			p, err := hw.ProbeRPC(ctx, endpoint, rpcProbeTimeout)
			if err != nil {
				return nil, fmt.Errorf("--rpc %s: %w", endpoint, err)
			}
			remotes = append(remotes, hw.Remote{Endpoint: endpoint, Probe: p})
			continue
		}
		if file == "" {
			return nil, usagef("--rpc %q: expected HOST:PORT or HOST:PORT=FILE, FILE the host's 'headroom hw --json'", spec)
		}
		r, err := hw.LoadMachine(file)
		if err != nil {
			return nil, fmt.Errorf("--rpc %s: %w", endpoint, err)
		}
		remotes = append(remotes, hw.Remote{Endpoint: endpoint, Snapshot: r})
	}
	return hw.Join(s, remotes)
}
