package api

import (
	"embed"
	"io/fs"
	"net/http"
)

// docsFiles is the docs page and its Swagger UI assets (see docs/README.md
// for their origin and license). Nothing of the page loads from the
// internet.
//
//go:embed docs/index.html docs/init.js docs/swagger-ui-bundle.js docs/swagger-ui.css docs/LICENSE docs/NOTICE docs/swagger-ui-bundle.js.LICENSE.txt
var docsFiles embed.FS

// docsCSP allows the page its own assets only. Swagger UI sets inline
// styles; its scripts are all files.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// registerDocs serves GET /docs and GET /docs/assets/*, and
// python-executor's documented docs URLs: /docs/index.html (the page) and
// /docs/doc.json (the API description, the same document as
// /openapi.json, which huma serves on mux).
func registerDocs(mux *http.ServeMux) {
	sub, index := embeddedPage(docsFiles, "docs")
	page := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Security-Policy", docsCSP)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(index)
	}
	mux.HandleFunc("GET /docs", page)
	mux.HandleFunc("GET /docs/index.html", page)
	mux.HandleFunc("GET /docs/doc.json", func(w http.ResponseWriter, r *http.Request) {
		spec := r.Clone(r.Context())
		spec.URL.Path, spec.URL.RawPath = "/openapi.json", ""
		mux.ServeHTTP(w, spec)
	})
	assets := http.StripPrefix("/docs/assets/", http.FileServerFS(sub))
	mux.HandleFunc("GET /docs/assets/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		assets.ServeHTTP(w, r)
	})
}

// embeddedPage is the tree below dir of files and its index.html. Both are
// fixed at build time: a failure is a broken build and panics.
func embeddedPage(files embed.FS, dir string) (fs.FS, []byte) {
	sub, err := fs.Sub(files, dir)
	if err != nil {
		panic(err)
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	return sub, index
}
