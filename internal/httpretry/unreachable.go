package httpretry

import (
	"errors"
	"net"
)

// Unreachable reports whether err says the server could not be reached
// at all: its name did not resolve, or no connection could be made to it
// (refused, no route, network down). Trying again a moment later gives
// the same answer, so these are not retried; a connection that broke
// after it was made is another matter.
func Unreachable(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
