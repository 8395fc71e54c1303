package devserver

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDevLogger(t *testing.T) {
	tests := []struct {
		name, level, format string
		levelSet            bool
		wantErr             string   // the error names this, when set
		term, termNot       []string // in / not in the terminal's output
		logs                []string // in the JSON log
	}{
		{name: "default: text, warn and up on the terminal", level: "info",
			term: []string{"level=WARN msg=w"}, termNot: []string{"msg=i", "{"}, logs: []string{`"msg":"i"`, `"msg":"w"`}},
		{name: "TRIAGE_LOG_LEVEL sets the terminal's level", level: "info", levelSet: true, format: "text",
			term: []string{"level=INFO msg=i"}, logs: []string{`"msg":"i"`}},
		{name: "json", level: "info", format: "json", term: []string{`"msg":"i"`, `"msg":"w"`}, termNot: []string{"level=WARN"}},
		{name: "unknown format", level: "info", format: "JSONL", wantErr: "TRIAGE_LOG_FORMAT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var term, logs bytes.Buffer
			log, err := devLogger(&term, &logs, tt.level, tt.format, tt.levelSet)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info("i")
			log.Warn("w")
			for _, s := range tt.term {
				if !strings.Contains(term.String(), s) {
					t.Errorf("terminal lacks %q:\n%s", s, term.String())
				}
			}
			for _, s := range tt.termNot {
				if strings.Contains(term.String(), s) {
					t.Errorf("terminal has %q:\n%s", s, term.String())
				}
			}
			for _, s := range tt.logs {
				if !strings.Contains(logs.String(), s) {
					t.Errorf("log lacks %q:\n%s", s, logs.String())
				}
			}
		})
	}
}

func TestHandedBack(t *testing.T) {
	for n, want := range map[int64]string{
		0: "no running tasks to hand back",
		1: "1 running task handed back to its queue",
		3: "3 running tasks handed back to their queues",
	} {
		if got := handedBack(n); got != want {
			t.Errorf("handedBack(%d) = %q, want %q", n, got, want)
		}
	}
}

// A dev server that stops removes its settings file, but not one that a
// dev server started after it wrote: that one is still running.
func TestRemoveIfUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), EnvFileName("127.0.0.1:8080"))
	ours, theirs := []byte("TRIAGE_URL=http://127.0.0.1:1\n"), []byte("TRIAGE_URL=http://127.0.0.1:2\n")
	if err := os.WriteFile(path, theirs, 0o600); err != nil {
		t.Fatal(err)
	}
	removeIfUnchanged(path, ours)
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, theirs) {
		t.Fatalf("the other server's file is %q, %v after our stop", b, err)
	}
	if err := os.WriteFile(path, ours, 0o600); err != nil {
		t.Fatal(err)
	}
	removeIfUnchanged(path, ours)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("our file is still there: %v", err)
	}
	removeIfUnchanged(path, ours) // a missing file is no error
}
