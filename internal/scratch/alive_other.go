//go:build !unix

package scratch

// alive cannot tell on this system, so nothing is swept.
func alive(int) bool { return true }
