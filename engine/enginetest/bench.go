package enginetest

import (
	"fmt"
	"testing"
)

// Bench writes a stand-in llama-bench that prints llama-bench's JSON for
// the -p, -n, -d and -r it is given, at pp and tg tokens per second
// (every sample the same), and which logs each call.
func Bench(t *testing.T, pp, tg float64) (bin, calls string) {
	t.Helper()
	return standIn(t, "llama-bench", `p=512; n=128; d=0; r=5
while [ $# -gt 0 ]; do
	case "$1" in
	-p) p=$2; shift ;;
	-n) n=$2; shift ;;
	-d) d=$2; shift ;;
	-r) r=$2; shift ;;
	esac
	shift
done
samples() {
	s="$1"; i=1
	while [ $i -lt $r ]; do s="$s, $1"; i=$((i + 1)); done
	echo "$s"
}
row() {
	echo "{\"build_commit\": \"abc1234\", \"build_number\": 1, \"n_prompt\": $1, \"n_gen\": $2, \"n_depth\": $d, \"avg_ts\": $3, \"stddev_ts\": 0.0, \"samples_ts\": [ $(samples $3) ]}"
}
echo "["
sep=""
if [ "$p" -gt 0 ]; then echo "$(row $p 0 `+fmt.Sprint(pp)+`)"; sep=","; fi
if [ "$n" -gt 0 ]; then echo "$sep$(row 0 $n `+fmt.Sprint(tg)+`)"; fi
echo "]"
`)
}
