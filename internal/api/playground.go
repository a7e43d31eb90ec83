package api

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"net/http"
)

// playgroundFiles is the web playground served at / (see
// docs/playground.md): a page, its style, its scripts as ES modules and
// the CodeMirror bundle web/build.sh makes. Nothing loads from elsewhere.
//
//go:embed web/index.html web/style.css web/*.js web/NOTICE
var playgroundFiles embed.FS

// playgroundCSP is the Content-Security-Policy of the page: its own files
// and its own origin only. Plots are data: and blob: images; downloads are
// blob: URLs. Output HTML from user code is rebuilt from an allowlist
// (render.js), never inserted as markup, and no inline script could run
// even if some slipped through. The one inline style element allowed is
// the editor's, which carries the response's nonce; the assets, which are
// no documents, get no nonce. frameSrc, when not empty, is where the
// notebook's preview frame may load from (preview.Origin.FrameSource);
// without previews no frame loads anything.
func playgroundCSP(nonce, frameSrc string) string {
	style := "style-src 'self'"
	if nonce != "" {
		style += " 'nonce-" + nonce + "'"
	}
	frame := ""
	if frameSrc != "" {
		frame = "frame-src " + frameSrc + "; "
	}
	return "default-src 'none'; script-src 'self'; " + style + "; img-src 'self' data: blob:; connect-src 'self'; " +
		frame + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// nonceMarker is replaced in index.html by the nonce of each response.
var nonceMarker = []byte("CSP_NONCE")

// playgroundPrefix is where the page's assets are served.
const playgroundPrefix = "/playground/"

// registerPlayground serves GET / (the page) and GET /playground/* (its
// assets). Both are open paths: the page asks for an API key itself when
// /health says the server needs one. frameSrc is playgroundCSP's.
func registerPlayground(mux *http.ServeMux, frameSrc string) {
	sub, index := embeddedPage(playgroundFiles, "web")
	secure := func(h http.Header, nonce string) {
		h.Set("Content-Security-Policy", playgroundCSP(nonce, frameSrc))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		nonce := newNonce()
		secure(w.Header(), nonce)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(bytes.ReplaceAll(index, nonceMarker, []byte(nonce)))
	})
	assets := http.StripPrefix(playgroundPrefix, http.FileServerFS(sub))
	mux.HandleFunc("GET "+playgroundPrefix, func(w http.ResponseWriter, r *http.Request) {
		secure(w.Header(), "")
		assets.ServeHTTP(w, r)
	})
}

// newNonce is 128 random bits for a Content-Security-Policy nonce.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}
