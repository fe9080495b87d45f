package server

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
)

//go:embed panel/index.html panel/app.js panel/instances.js panel/style.css
var panelFiles embed.FS

// panelHandler serves the web panel. Its policy allows nothing but this
// server, so the panel can never fetch from, or report to, anywhere else.
func panelHandler() (http.Handler, error) {
	sub, err := fs.Sub(panelFiles, "panel")
	if err != nil {
		return nil, fmt.Errorf("server: the embedded panel: %w", err)
	}
	files := http.FileServerFS(sub)
	return route(http.MethodGet, func(w http.ResponseWriter, r *http.Request) error {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		files.ServeHTTP(w, r)
		return nil
	}), nil
}
