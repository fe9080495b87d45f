package engine

import (
	"bufio"
	"net/http"
	"os"
	"strings"
)

// apiKeyOf is the key a llama-server started with args wants in
// "Authorization: Bearer KEY": the first of --api-key's comma-separated
// keys, else the first key of --api-key-file (one per line, lines
// starting with # left out); "" where neither is given. Start's own
// requests (readiness, /health, /slots) send it, so a server started
// with a key is proved ready like any other.
func apiKeyOf(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--api-key":
			k, _, _ := strings.Cut(args[i+1], ",")
			return strings.TrimSpace(k)
		case "--api-key-file":
			f, err := os.Open(args[i+1])
			if err != nil {
				return "" // llama-server says why it cannot read it
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if k := strings.TrimSpace(sc.Text()); k != "" && !strings.HasPrefix(k, "#") {
					return k
				}
			}
			return ""
		}
	}
	return ""
}

// keyed sends a bearer key with every request.
type keyed struct {
	base http.RoundTripper
	key  string
}

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.base.RoundTrip(r)
}
