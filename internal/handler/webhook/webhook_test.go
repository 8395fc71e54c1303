package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/handlertest"
	"github.com/triagehq/triage/triagetype"
)

var (
	testSecret = []byte("s3cret-for-tests")
	testNow    = time.Unix(1_750_000_000, 0)
)

func testRequest() handler.Request {
	return handler.Request{
		ID:                "01JTESTTASK",
		Type:              "resize",
		Payload:           json.RawMessage(`{"w":640,"h":480}`),
		Priority:          triagetype.Low, // submitted low, promoted to high
		EffectivePriority: triagetype.High,
		Attempt:           2,
		MaxAttempts:       5,
		TraceID:           "trace-1",
	}
}

// received is what the test server saw of one request.
type received struct {
	header http.Header
	body   []byte
	err    error // Verify's verdict with the test secret
}

// server is a loopback webhook receiver that verifies each request and then
// answers with reply.
func server(t *testing.T, reply http.HandlerFunc) (*httptest.Server, func() []received) {
	t.Helper()
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("server read body: %v", err)
		}
		rec := received{header: r.Header.Clone(), body: body}
		rec.err = Verify(testSecret, r.Header.Get(HeaderTimestamp), body, r.Header.Get(HeaderSignature), testNow, time.Minute)
		mu.Lock()
		got = append(got, rec)
		mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

func respond(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func clock() func() time.Time { return func() time.Time { return testNow } }

func TestHandleRequestIsSignedAndComplete(t *testing.T) {
	srv, got := server(t, respond(http.StatusOK, "application/json", `{"ok":true}`))
	h := New(srv.URL+"/hook?token=abc", testSecret, WithClock(clock()))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	if _, err := h.Handle(ctx, testRequest()); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	reqs := got()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	rec := reqs[0]
	if rec.err != nil {
		t.Errorf("Verify on the server: %v", rec.err)
	}
	for name, want := range map[string]string{
		"Content-Type":  "application/json",
		HeaderTaskID:    "01JTESTTASK",
		HeaderAttempt:   "2",
		HeaderTimestamp: strconv.FormatInt(testNow.Unix(), 10),
		HeaderSignature: Sign(testSecret, strconv.FormatInt(testNow.Unix(), 10), rec.body),
	} {
		if g := rec.header.Get(name); g != want {
			t.Errorf("header %s = %q, want %q", name, g, want)
		}
	}
	if sig := rec.header.Get(HeaderSignature); !strings.HasPrefix(sig, "v1=") || len(sig) != 3+64 {
		t.Errorf("signature %q is not v1=<64 hex digits>", sig)
	}

	var body map[string]json.RawMessage
	if err := json.Unmarshal(rec.body, &body); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	for key, want := range map[string]string{
		"id":                 `"01JTESTTASK"`,
		"type":               `"resize"`,
		"payload":            `{"w":640,"h":480}`,
		"priority":           `"low"`,
		"effective_priority": `"high"`,
		"attempt":            `2`,
		"max_attempts":       `5`,
		"trace_id":           `"trace-1"`,
	} {
		if g := string(body[key]); g != want {
			t.Errorf("body[%q] = %s, want %s", key, g, want)
		}
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"id":"t1"}`)
	ts := strconv.FormatInt(testNow.Unix(), 10)
	good := Sign(testSecret, ts, body)
	tests := []struct {
		name      string
		secret    []byte
		timestamp string
		body      []byte
		signature string
		now       time.Time
		want      error // nil, ErrBadSignature or ErrBadTimestamp
		contains  string
	}{
		{name: "valid", secret: testSecret, timestamp: ts, body: body, signature: good, now: testNow},
		{name: "valid within tolerance", secret: testSecret, timestamp: ts, body: body, signature: good, now: testNow.Add(59 * time.Second)},
		{name: "valid among several entries", secret: testSecret, timestamp: ts, body: body, signature: "v0=abc, v1=" + strings.Repeat("0", 64) + ", " + good, now: testNow},
		{name: "wrong secret", secret: []byte("other"), timestamp: ts, body: body, signature: good, now: testNow, want: ErrBadSignature, contains: "does not match"},
		{name: "altered body", secret: testSecret, timestamp: ts, body: []byte(`{"id":"t2"}`), signature: good, now: testNow, want: ErrBadSignature},
		{name: "altered timestamp", secret: testSecret, timestamp: strconv.FormatInt(testNow.Unix()+1, 10), body: body, signature: good, now: testNow, want: ErrBadSignature},
		{name: "stale timestamp", secret: testSecret, timestamp: ts, body: body, signature: good, now: testNow.Add(2 * time.Minute), want: ErrBadTimestamp, contains: "old"},
		{name: "future timestamp", secret: testSecret, timestamp: ts, body: body, signature: good, now: testNow.Add(-2 * time.Minute), want: ErrBadTimestamp, contains: "future"},
		{name: "non-numeric timestamp", secret: testSecret, timestamp: "yesterday", body: body, signature: good, now: testNow, want: ErrBadTimestamp},
		{name: "no v1 entry", secret: testSecret, timestamp: ts, body: body, signature: "v2=" + good[3:], now: testNow, want: ErrBadSignature, contains: "no v1="},
		{name: "not hex", secret: testSecret, timestamp: ts, body: body, signature: "v1=zz", now: testNow, want: ErrBadSignature},
		{name: "empty signature", secret: testSecret, timestamp: ts, body: body, signature: "", now: testNow, want: ErrBadSignature},
		{name: "empty secret", secret: nil, timestamp: ts, body: body, signature: good, now: testNow, want: ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.secret, tt.timestamp, tt.body, tt.signature, tt.now, time.Minute)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("Verify: %q does not contain %q", err, tt.contains)
			}
		})
	}
}

func TestVerifyDefaultTolerance(t *testing.T) {
	body := []byte("x")
	ts := strconv.FormatInt(testNow.Unix(), 10)
	sig := Sign(testSecret, ts, body)
	if err := Verify(testSecret, ts, body, sig, testNow.Add(DefaultTolerance-time.Second), 0); err != nil {
		t.Errorf("inside default tolerance: %v", err)
	}
	if err := Verify(testSecret, ts, body, sig, testNow.Add(DefaultTolerance+time.Second), 0); !errors.Is(err, ErrBadTimestamp) {
		t.Errorf("outside default tolerance: %v, want ErrBadTimestamp", err)
	}
}

func TestHandleStatus(t *testing.T) {
	long := strings.Repeat("x", 4000)
	tests := []struct {
		name        string
		reply       http.HandlerFunc
		wantResult  string // compared when wantErr is false
		wantErr     bool
		permanent   bool
		errContains []string
		errMaxLen   int
	}{
		{name: "200 JSON", reply: respond(200, "application/json", `{"thumb":"s3://b/k"}`), wantResult: `{"thumb":"s3://b/k"}`},
		{name: "200 JSON with whitespace", reply: respond(200, "application/json", " [1,2]\n"), wantResult: `[1,2]`},
		{name: "200 text", reply: respond(200, "text/plain", "done"), wantResult: `"done"`},
		{name: "200 empty", reply: respond(200, "", ""), wantResult: `null`},
		{name: "201 JSON", reply: respond(201, "application/json", `7`), wantResult: `7`},
		{name: "204", reply: respond(204, "", ""), wantResult: `null`},
		{name: "400", reply: respond(400, "application/json", `{"error":"bad payload"}`), wantErr: true, permanent: true, errContains: []string{"status 400", "bad payload"}},
		{name: "404", reply: respond(404, "text/plain", "no such hook"), wantErr: true, permanent: true, errContains: []string{"status 404", "no such hook"}},
		{name: "422", reply: respond(422, "", ""), wantErr: true, permanent: true, errContains: []string{"status 422", "empty body"}},
		{name: "422 long body is truncated", reply: respond(422, "text/plain", long), wantErr: true, permanent: true, errContains: []string{"status 422", "truncated"}, errMaxLen: 700},
		{name: "408", reply: respond(408, "", "slow"), wantErr: true, errContains: []string{"status 408"}},
		{name: "429", reply: respond(429, "", "slow down"), wantErr: true, errContains: []string{"status 429", "slow down"}},
		{name: "500", reply: respond(500, "text/plain", "kaboom"), wantErr: true, errContains: []string{"status 500", "kaboom"}},
		{name: "503", reply: respond(503, "", ""), wantErr: true, errContains: []string{"status 503"}},
		{name: "302 not followed", reply: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				t.Error("redirect was followed")
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, wantErr: true, permanent: true, errContains: []string{"status 302", "not followed"}},
		{name: "2xx over 1 MiB", reply: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(200)
			w.Write([]byte(strings.Repeat(" ", MaxResponseBytes+10)))
		}, wantErr: true, permanent: true, errContains: []string{"exceeds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := server(t, tt.reply)
			h := New(srv.URL+"/hook?token=hidden", testSecret, WithClock(clock()))
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()

			res, err := h.Handle(ctx, testRequest())
			if !handlertest.Check(t, res, err, handlertest.Outcome{WantResult: tt.wantResult, WantErr: tt.wantErr, Permanent: tt.permanent, ErrContains: tt.errContains}) {
				return
			}
			if strings.Contains(err.Error(), "hidden") {
				t.Errorf("error %q leaks the URL query", err)
			}
			if tt.errMaxLen > 0 && len(err.Error()) > tt.errMaxLen {
				t.Errorf("error is %d bytes, want at most %d", len(err.Error()), tt.errMaxLen)
			}
		})
	}
}

func TestHandleTransportFailures(t *testing.T) {
	// The slow server waits for the client to give up, but never longer than
	// a few seconds, so a broken test cannot hang.
	slow, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})

	// A port that was just listening and is now closed refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String() + "/hook"
	ln.Close()

	tests := []struct {
		name     string
		url      string
		timeout  time.Duration
		contains string
		deadline bool
	}{
		{name: "task deadline while the server sleeps", url: slow.URL, timeout: 100 * time.Millisecond, contains: "timeout", deadline: true},
		{name: "connection refused", url: closedURL, timeout: 5 * time.Second, contains: "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(tt.url, testSecret)
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			start := time.Now()
			res, err := h.Handle(ctx, testRequest())
			handlertest.Check(t, res, err, handlertest.Outcome{WantErr: true, ErrContains: []string{tt.contains}})
			if tt.deadline {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("Handle took %v, want about the 100ms deadline", d)
				}
			}
		})
	}
}

func TestHandleConfigErrorsArePermanent(t *testing.T) {
	tests := []struct {
		name     string
		h        *Handler
		contains string
	}{
		{name: "empty secret", h: New("http://127.0.0.1:1/hook", nil), contains: "secret"},
		{name: "bad URL", h: New("http://127.0.0.1:1/\x7f", testSecret), contains: "invalid"},
		{name: "unsupported scheme", h: New("ftp://127.0.0.1/hook", testSecret), contains: "invalid URL"},
		{name: "no host", h: New("/hook", testSecret), contains: "invalid URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := tt.h.Handle(ctx, testRequest())
			if err == nil {
				t.Fatal("Handle: nil error")
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q does not contain %q", err, tt.contains)
			}
			if handler.Retriable(err) {
				t.Errorf("error %v is retriable, want permanent", err)
			}
		})
	}
}
