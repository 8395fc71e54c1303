package docs

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository's root: this package's parent folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod above docs/: %v", err)
	}
	return root
}

// pages are the markdown files whose links are checked: README.md, every
// page in docs/, and the READMEs of infra/ and localstack/, which link
// into them.
func pages(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no pages in docs/")
	}
	out := []string{filepath.Join(root, "README.md")}
	out = append(out, docs...)
	for _, p := range []string{"infra/README.md", "localstack/README.md"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			out = append(out, filepath.Join(root, p))
		}
	}
	return out
}

var (
	reFence  = regexp.MustCompile("^\\s*(```|~~~)")
	reCode   = regexp.MustCompile("`+[^`]*`+")
	reLink   = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	reHeader = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	reAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	reSlugNo = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// prose returns a page's lines outside fenced code blocks, with inline
// code spans blanked out, so a link shown as code is not checked.
func prose(text string) []string {
	var out []string
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if reFence.MatchString(line) {
			fence = !fence
			out = append(out, "")
			continue
		}
		if fence {
			out = append(out, "")
			continue
		}
		out = append(out, reCode.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat(" ", len(s)) }))
	}
	return out
}

// slug is GitHub's anchor for a heading: lower case, markup and
// punctuation dropped, spaces turned into hyphens.
func slug(heading string) string {
	h := strings.ToLower(heading)
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1") // a link's text
	h = strings.NewReplacer("`", "", "*", "", "_", "_").Replace(h)
	h = reSlugNo.ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// anchors are the #fragments a markdown file answers to: one per heading
// (a repeated heading gets -1, -2, ... as on GitHub) and explicit
// <a name> / <a id> tags.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if reFence.MatchString(line) {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range reAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := reHeader.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// Every relative link in README.md and docs/*.md names a file or folder
// that exists, and every #anchor (on the same page or into another
// markdown file) names a heading there.
func TestLinksResolve(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	for _, page := range pages(t, root) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for i, line := range prose(string(b)) {
			for _, m := range reLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if u, err := url.Parse(target); err == nil && u.Scheme != "" {
					continue // http(s), mailto: not ours to check
				}
				checked++
				where := fmt.Sprintf("%s:%d: %s", rel, i+1, target)
				path, frag, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					if strings.HasPrefix(path, "/") {
						t.Errorf("%s: a link from the root is not relative", where)
						continue
					}
					file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
					if r, err := filepath.Rel(root, file); err != nil || strings.HasPrefix(r, "..") {
						t.Errorf("%s: points outside the repository", where)
						continue
					}
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s: no such file or folder", where)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					t.Errorf("%s: an anchor into a file that is not markdown", where)
					continue
				}
				tb, err := os.ReadFile(file)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				if !anchors(string(tb))[frag] {
					t.Errorf("%s: %s has no heading #%s", where, filepath.Base(file), frag)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d relative links: is the link pattern still right?", checked)
	}
}

// The anchors are GitHub's: a few headings of the kinds the pages use.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Keys, fairness and waiting": "keys-fairness-and-waiting",
		"Local stack and LocalStack": "local-stack-and-localstack",
		"`triage dev` and the CLI":   "triage-dev-and-the-cli",
		"Durable steps (not built)":  "durable-steps-not-built",
		"Performance & cost":         "performance--cost",
		"Retry-After":                "retry-after",
		"What one task writes, in $": "what-one-task-writes-in-",
		"Grants and environments":    "grants-and-environments",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// The README stays a five-minute read: at most 300 lines, the first task
// submitted (a curl) within its first 60, and a link to every page in
// docs/, so the rest of the manual is one click away.
func TestReadmeIsAStart(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 300 {
		t.Errorf("README.md has %d lines, more than 300: move the detail into a page of docs/", len(lines))
	}
	first := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "curl ") })
	if first < 0 || first+1 > 60 {
		t.Errorf("README.md's first curl is at line %d, not within the first 60", first+1)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, d := range docs {
		if link := "(docs/" + filepath.Base(d) + ")"; !strings.Contains(string(b), link) {
			t.Errorf("README.md does not link docs/%s in its pages", filepath.Base(d))
		}
	}
}
