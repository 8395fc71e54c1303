package devserver

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Each listen address gets its own file names, safe in a path.
func TestStateFileNames(t *testing.T) {
	tests := []struct{ addr, env, log string }{
		{"127.0.0.1:8080", "dev-127.0.0.1_8080.env", "dev-127.0.0.1_8080.log"},
		{"127.0.0.1:8081", "dev-127.0.0.1_8081.env", "dev-127.0.0.1_8081.log"},
		{"[::1]:8080", "dev-___1__8080.env", "dev-___1__8080.log"},
		{"../x/y:1", "dev-.._x_y_1.env", "dev-.._x_y_1.log"},
	}
	for _, tt := range tests {
		if got := EnvFileName(tt.addr); got != tt.env {
			t.Errorf("EnvFileName(%q) = %q, want %q", tt.addr, got, tt.env)
		}
		if got := LogFileName(tt.addr); got != tt.log {
			t.Errorf("LogFileName(%q) = %q, want %q", tt.addr, got, tt.log)
		}
	}
}

// Servers reads every server's file, and Alive tells a running server's
// from the leftovers of a killed one.
func TestServers(t *testing.T) {
	dir := t.TempDir()
	write := func(addr string, body []byte) {
		if err := os.WriteFile(filepath.Join(dir, EnvFileName(addr)), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("127.0.0.1:1", envBody("http://127.0.0.1:1", "tok1", os.Getpid(), map[string]string{"AWS_REGION": "us-east-1", "TRIAGE_PREFIX": "a"}))
	write("127.0.0.1:2", envBody("http://127.0.0.1:2", "tok2", 1<<22+1, nil)) // above pid_max: no such process
	if err := os.WriteFile(filepath.Join(dir, "other.env"), []byte("TRIAGE_URL=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Servers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].URL != "http://127.0.0.1:1" || got[0].Token != "tok1" || got[1].Token != "tok2" {
		t.Fatalf("Servers = %+v", got)
	}
	if !got[0].Alive() || got[1].Alive() {
		t.Errorf("Alive: ours %v (want true), the dead one's %v (want false)", got[0].Alive(), got[1].Alive())
	}
	want := [][2]string{{"AWS_REGION", "us-east-1"}, {"TRIAGE_PREFIX", "a"}, {"TRIAGE_TOKEN", "tok1"}, {"TRIAGE_URL", "http://127.0.0.1:1"}}
	if w := got[0].WorkerEnv(); !reflect.DeepEqual(w, want) {
		t.Errorf("WorkerEnv = %v, want %v", w, want)
	}
	if none, err := Servers(filepath.Join(dir, "missing")); err != nil || len(none) != 0 {
		t.Errorf("Servers of a missing directory = %v, %v", none, err)
	}
}
