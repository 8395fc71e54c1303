// Package dashboard serves triage's operator dashboard: one static page
// where an operator works through a backlog or an incident. It shows the
// queues with their aging, the task statuses and charts drawn from the
// counters; pages through the tasks with filters and bulk actions; opens a
// task as fields, an attempt timeline and JSON viewers; lists, replays and
// purges dead letters; sets per-type pause, rate and concurrency limits;
// and shows the worker registry. Every request it makes is O(page) or
// O(1) in the number of tasks (see docs/operating.md, Dashboard).
//
// Why it is a static page and nothing more: the dashboard has no API, no
// state and no credentials of its own. Everything it shows or does goes
// through the public /api/v1 routes with the bearer token the operator gives
// it (from the URL fragment printed by `triage dev`, or typed into a form), so
// it can never see or do more than that token allows, and the API stays the
// one place that checks scopes. The files are embedded in the binary, so the
// dashboard ships inside the API function with no build step, no CDN and no
// asset host, and works on a machine without internet.
//
// The page, its script and its stylesheet are three files, so that the
// Content-Security-Policy can forbid inline script and style altogether.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"time"
)

// contentSecurityPolicy allows the page only its own script and stylesheet
// and calls to its own origin (the API); inline script and style, plugins,
// framing and form submissions (the forms are handled by the script) are
// refused. The data: image is the page's empty favicon.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"connect-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; " +
	"form-action 'none'; frame-ancestors 'none'"

//go:embed static/index.html static/dashboard.js static/dashboard.css
var static embed.FS

// Routes are the http.ServeMux patterns the dashboard must be mounted at, all
// with the handler from [Handler]:
//
//	GET /{$}             the page
//	GET /dashboard.js    its script
//	GET /dashboard.css   its stylesheet
//
// (A GET pattern also matches HEAD.) Behind API Gateway each of the three
// paths needs a GET route to the API function.
func Routes() []string {
	return []string{"GET /{$}", "GET /dashboard.js", "GET /dashboard.css"}
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

type handler struct {
	assets map[string]asset // by URL path
}

// Handler returns the dashboard. It serves exactly three paths, and 404 for
// any other:
//
//	/               the page (text/html)
//	/dashboard.js   its script (text/javascript)
//	/dashboard.css  its stylesheet (text/css)
//
// so the API server mounts it at every pattern of [Routes]:
//
//	h := dashboard.Handler()
//	for _, pattern := range dashboard.Routes() {
//		mux.Handle(pattern, h)
//	}
//
// It needs no authentication: the page holds no data, asks the operator for
// a token and sends it to the API as a bearer token. Every response carries a
// strict Content-Security-Policy (no inline script or style) and an ETag, so
// browsers revalidate instead of downloading the files again.
func Handler() http.Handler {
	h := &handler{assets: make(map[string]asset, 3)}
	for path, f := range map[string]struct{ file, contentType string }{
		"/":              {"static/index.html", "text/html; charset=utf-8"},
		"/dashboard.js":  {"static/dashboard.js", "text/javascript; charset=utf-8"},
		"/dashboard.css": {"static/dashboard.css", "text/css; charset=utf-8"},
	} {
		body, err := static.ReadFile(f.file)
		if err != nil {
			panic("dashboard: embedded file missing: " + err.Error()) // the go:embed line lists it
		}
		sum := sha256.Sum256(body)
		h.assets[path] = asset{body: body, contentType: f.contentType, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, ok := h.assets[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
