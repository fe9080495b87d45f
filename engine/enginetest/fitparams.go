package enginetest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// FitParams writes a stand-in llama-fit-params whose host breakdown
// grows by one MiB per 64 cells (16 KiB a cell) over 2000 MiB of weights
// and 200 MiB of compute, with ngl layers of 100 MiB each moved to a GPU
// when the machine has one (gpu != ""), and which logs each call.
func FitParams(t *testing.T, gpu string) (bin, calls string) {
	t.Helper()
	return standIn(t, "llama-fit-params", `c=0; ngl=0
while [ $# -gt 0 ]; do
	case "$1" in
	-c) c=$2; shift ;;
	-ngl) ngl=$2; shift ;;
	esac
	shift
done
ctx=$((c / 64))
echo "llama_context: n_ctx         = $c"
gpu="`+gpu+`"
if [ -n "$gpu" ]; then
	g=$((ngl * 100)); h=$((2000 - g))
	echo "llama_memory_breakdown_print: |   - $gpu (fake) | 24000 = 100 + ($((g + 50)) = $g + 0 + 50) + 0 |"
	echo "llama_memory_breakdown_print: |   - Host        |   $((h + ctx + 200)) = $h + $ctx + 200   |"
else
	echo "llama_memory_breakdown_print: |   - Host        |   $((2000 + ctx + 200)) = 2000 + $ctx + 200   |"
fi
`)
}

// standIn writes a shell script named name into a temporary directory:
// it logs each call's arguments to calls, a line each, then runs body.
func standIn(t *testing.T, name, body string) (bin, calls string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in is a shell script")
	}
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	bin = filepath.Join(dir, name)
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\n" + body
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, calls
}
