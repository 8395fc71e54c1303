package docs

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// goBlocks returns the ```go blocks of a markdown text.
func goBlocks(text string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(text, "```go\n")
		if !ok {
			return out
		}
		block, after, _ := strings.Cut(rest, "```")
		out = append(out, block)
		text = after
	}
}

// splitBlock separates a README block's declarations (a line starting
// with `type ` or `func `, through its closing brace at the line's start)
// from its statements.
func splitBlock(block string) (decls, stmts string) {
	var d, s strings.Builder
	in := false
	for _, line := range strings.Split(block, "\n") {
		switch {
		case !in && (strings.HasPrefix(line, "type ") || strings.HasPrefix(line, "func ")):
			d.WriteString(line + "\n")
			in = !strings.HasSuffix(line, "}")
		case in:
			d.WriteString(line + "\n")
			in = line != "}"
		default:
			s.WriteString(line + "\n")
		}
	}
	return d.String(), s.String()
}

// defined lists the names a block's statements declare with :=, so the
// program can use each once (a snippet leaves some unused).
func defined(t *testing.T, stmts string) []string {
	t.Helper()
	src := "package p\nfunc f() {\n" + stmts + "\n}\n"
	f, err := parser.ParseFile(token.NewFileSet(), "snippet.go", src, 0)
	if err != nil {
		t.Fatalf("a README Go block does not parse as statements: %v\n%s", err, stmts)
	}
	seen := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
			for _, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" {
					seen[id.Name] = true
				}
			}
		}
		_, isLit := n.(*ast.FuncLit)
		return !isLit // a handler's own variables are its business
	})
	var out []string
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// The packages a README snippet may name, by the name it calls them.
var snippetImports = map[string]string{
	"context":      "context",
	"errors":       "errors",
	"log":          "log",
	"os":           "os",
	"time":         "time",
	"triage":       "github.com/triagehq/triage",
	"worker":       "github.com/triagehq/triage/worker",
	"direct":       "github.com/triagehq/triage/direct",
	"triageconfig": "github.com/triagehq/triage/triageconfig",
}

// The README's Go blocks compile together as one program against this
// module: declarations at the top level, each block's statements in a
// scope of their own inside main, with a ctx. What a snippet shows is
// what a program can write.
func TestReadmeGoCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program against the module")
	}
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(b))
	if len(blocks) < 2 {
		t.Fatalf("README.md has %d Go blocks; it shows a submit and a worker", len(blocks))
	}
	var decls, body strings.Builder
	for _, block := range blocks {
		d, s := splitBlock(block)
		decls.WriteString(d + "\n")
		body.WriteString("\t{\n" + s)
		for _, name := range defined(t, s) {
			body.WriteString("\t\t_ = " + name + "\n")
		}
		body.WriteString("\t}\n")
	}
	code := decls.String() + "func main() {\n\tctx := context.Background()\n\t_ = ctx\n" + body.String() + "}\n"
	var imports []string
	for name, path := range snippetImports {
		if name == "context" || regexp.MustCompile(`\b`+name+`\.`).MatchString(code) {
			imports = append(imports, fmt.Sprintf("%q", path))
		}
	}
	sort.Strings(imports)
	src := "package main\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n" + code

	// The program is built as a package of this module through an overlay,
	// so it needs no module of its own and leaves no file behind.
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, "docs", "readmecheck", "main.go"): file}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goCommand(), "build", "-overlay", ov, "-o", os.DevNull, "./docs/readmecheck")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the README's Go blocks do not compile: %v\n%s\nthe program:\n%s", err, out, src)
	}
}
