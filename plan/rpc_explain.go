package plan

import (
	"fmt"
	"strings"
)

// rpcHostsLine says, for a plan over rpc-servers, what each host carries
// and which one limits: the domain with the least margin among those that
// hold part of the model, since that host's memory is what stops more
// layers or context. Every domain, the remote ones included, keeps the fit
// target free (the search checks each separately), so no layer goes to a
// host that would not hold it. "" for a plan without remote devices.
func rpcHostsLine(c *Candidate) string {
	if c == nil || c.Result == nil || rpcLine(c.Flags) == "" {
		return ""
	}
	var parts []string
	limit, least := "", int64(0)
	for _, d := range c.Result.Domains {
		if d.Required <= 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d of %d MiB", d.ID, d.Required>>20, d.Available>>20))
		if limit == "" || d.Margin < least {
			limit, least = d.ID, d.Margin
		}
	}
	if limit == "" {
		return ""
	}
	return fmt.Sprintf("per host: %s; the limiting one is %s, %d MiB left", strings.Join(parts, ", "), limit, least>>20)
}
