package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandlerServesFiles(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script src="dashboard.js" defer></script>`},
		{"/dashboard.js", "text/javascript; charset=utf-8", "'use strict'"},
		{"/dashboard.css", "text/css; charset=utf-8", ".badge"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			res := rec.Result()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", res.StatusCode)
			}
			if got := res.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			csp := res.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe") {
				t.Errorf("Content-Security-Policy %q allows something unsafe", csp)
			}
			if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			if !strings.Contains(string(body), tc.contains) {
				t.Errorf("body lacks %q", tc.contains)
			}
			if res.Header.Get("ETag") == "" {
				t.Error("no ETag")
			}
		})
	}
}

// The CSP forbids inline script and style, so the page must have none: no
// <script> or <style> element with content, no style="" or on*="" attribute.
func TestPageHasNoInlineScriptOrStyle(t *testing.T) {
	page, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	html := strings.ToLower(string(page))
	for _, bad := range []string{"<style", " style=", " onclick=", " onload=", " onsubmit=", " onchange=", "javascript:", "<script>"} {
		if strings.Contains(html, bad) {
			t.Errorf("index.html contains %q, which the Content-Security-Policy blocks", bad)
		}
	}
	for _, ext := range []string{"http://", "https://"} {
		if strings.Contains(html, ext) {
			t.Errorf("index.html refers to an external URL (%q); the page must be self-contained", ext)
		}
	}
}

func TestHandlerRevalidates(t *testing.T) {
	h := Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dashboard.js", nil))
	etag := rec.Result().Header.Get("ETag")

	req := httptest.NewRequest(http.MethodGet, "/dashboard.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match with the ETag: status %d, want 304", rec.Code)
	}
}

func TestHandlerOtherPathsAndMethods(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/index.html", http.StatusNotFound},
		{http.MethodGet, "/static/dashboard.js", http.StatusNotFound},
		{http.MethodGet, "/api/v1/stats", http.StatusNotFound},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodHead, "/", http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, rec.Code, tc.want)
		}
	}
}

// Mounted as the API server will mount it, the dashboard answers its three
// paths and leaves every other path to the rest of the mux.
func TestRoutesOnServeMux(t *testing.T) {
	mux := http.NewServeMux()
	h := Handler()
	for _, p := range Routes() {
		mux.Handle(p, h)
	}
	mux.HandleFunc("GET /api/v1/stats", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "stats") })
	for path, want := range map[string]string{
		"/":              "text/html; charset=utf-8",
		"/dashboard.js":  "text/javascript; charset=utf-8",
		"/dashboard.css": "text/css; charset=utf-8",
		"/api/v1/stats":  "text/plain; charset=utf-8",
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != want {
			t.Errorf("GET %s: %d %q, want 200 %q", path, rec.Code, rec.Header().Get("Content-Type"), want)
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/other", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /other: %d, want 404", rec.Code)
	}
}
