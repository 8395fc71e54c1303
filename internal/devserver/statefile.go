package devserver

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/triagehq/triage/internal/emulators"
	"github.com/triagehq/triage/triageconfig"
)

// Each `triage dev` keeps two files in the state directory, both named by
// the address it listens on ("dev-127.0.0.1_8080.env" and ".log"): its
// settings file and its JSON log. Keying them by address is what lets two
// servers run side by side: no two live servers can hold one address, so
// no two write one file, and a server's exit removes only what it wrote.
const (
	stateFilePrefix = "dev-"
	envFileSuffix   = ".env"
	logFileSuffix   = ".log"
)

// The settings file's own keys; the rest of its lines are the settings a
// worker needs (WorkerEnv).
const (
	KeyURL   = "TRIAGE_URL"     // the API's base URL
	KeyToken = "TRIAGE_TOKEN"   // its admin token
	KeyPID   = "TRIAGE_DEV_PID" // the server's process, to tell a live server from a killed one's leftovers
)

// stateKey turns a listen address into a file name part: every character
// other than a letter, digit, dot or hyphen becomes "_" ("127.0.0.1:8080"
// is "127.0.0.1_8080", "[::1]:8080" is "___1__8080").
func stateKey(addr string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			return r
		}
		return '_'
	}, addr)
}

// EnvFileName is the name, in the state directory, of the settings file of
// the dev server listening on addr.
func EnvFileName(addr string) string { return stateFilePrefix + stateKey(addr) + envFileSuffix }

// LogFileName is the name of the JSON log of the dev server listening on addr.
func LogFileName(addr string) string { return stateFilePrefix + stateKey(addr) + logFileSuffix }

// Server is one dev server as its settings file describes it.
type Server struct {
	Path  string            // the settings file
	URL   string            // KeyURL
	Token string            // KeyToken
	PID   int               // KeyPID; 0 when the file does not say
	Env   map[string]string // every KEY=value line of the file
}

// Alive reports whether the server's process still runs. A file that names
// no process counts as alive: only a file known to be stale is set aside.
func (s Server) Alive() bool {
	if s.PID <= 0 {
		return true
	}
	err := syscall.Kill(s.PID, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// WorkerEnv is what a worker beside this server needs in its environment
// (endpoints, region, credentials, resource names, and the API's URL and
// token), in a stable order: the file's lines less KeyPID.
func (s Server) WorkerEnv() [][2]string {
	var kv [][2]string
	for k, v := range s.Env {
		if k != KeyPID {
			kv = append(kv, [2]string{k, v})
		}
	}
	sort.Slice(kv, func(i, j int) bool { return kv[i][0] < kv[j][0] })
	return kv
}

// Servers reads every dev server's settings file in dir, sorted by path;
// none (and no error) when dir does not exist.
func Servers(dir string) ([]Server, error) {
	paths, err := filepath.Glob(filepath.Join(dir, stateFilePrefix+"*"+envFileSuffix))
	if err != nil {
		return nil, fmt.Errorf("list dev server settings in %s: %w", dir, err)
	}
	sort.Strings(paths)
	var out []Server
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by its exiting server since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("read dev server settings: %w", err)
		}
		s := Server{Path: p, Env: parseEnv(b)}
		s.URL, s.Token = s.Env[KeyURL], s.Env[KeyToken]
		s.PID, _ = strconv.Atoi(s.Env[KeyPID])
		out = append(out, s)
	}
	return out, nil
}

// parseEnv reads KEY=value lines; other lines are ignored.
func parseEnv(b []byte) map[string]string {
	set := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) != "" {
			set[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return set
}

// envBody is a settings file's content: the URL, token and PID first, then
// the worker's settings sorted by name.
func envBody(url, token string, pid int, worker map[string]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s=%s\n%s=%s\n%s=%d\n", KeyURL, url, KeyToken, token, KeyPID, pid)
	keys := make([]string, 0, len(worker))
	for k := range worker {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, worker[k])
	}
	return b.Bytes()
}

// localAWSDefaults are the region and credentials the dev server uses when
// the environment names none: the emulators accept any, and a worker beside
// the server must sign with the same region to reach the same queues.
func localAWSDefaults() map[string]string {
	return map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
}

// workerAWSKeys are the SDK variables a worker needs to reach the same
// local stack as the server: every endpoint triage's services use (the
// single-port AWS_ENDPOINT_URL of LocalStack too), the region and the
// credentials.
var workerAWSKeys = []string{
	"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_DYNAMODB",
	"AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "AWS_ENDPOINT_URL_S3",
	"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
}

// workerEnv is what the settings file tells a worker beside the server:
// the emulators' endpoints (or the ones the server was given), the region
// and credentials, as the server itself resolved them, and the names of the
// resources (the prefix, and the table and bucket when set apart from it).
func workerEnv(getenv func(string) string, emu *emulators.Emulators, cfg triageconfig.Config) map[string]string {
	env := map[string]string{}
	for _, k := range workerAWSKeys {
		if v := getenv(k); v != "" {
			env[k] = v
		}
	}
	if emu != nil {
		maps.Copy(env, emu.Env())
	}
	for k, v := range localAWSDefaults() {
		if env[k] == "" {
			env[k] = v
		}
	}
	env[triageconfig.EnvPrefix] = cfg.Prefix
	for _, k := range []string{triageconfig.EnvTable, triageconfig.EnvBucket} {
		if v := getenv(k); v != "" {
			env[k] = v
		}
	}
	return env
}

// workerBanner tells the terminal what a worker of one's own needs, the
// same settings `triage env` prints as exports.
func workerBanner(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("  Your own worker beside it needs these (eval \"$(triage env)\" sets them):\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "    %s=%s\n", k, env[k])
	}
	return b.String()
}
