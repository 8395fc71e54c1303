package lambdainvoke

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/handlertest"
	"github.com/triagehq/triage/triagetype"
)

const testARN = "arn:aws:lambda:us-east-1:123456789012:function:resize"

func testRequest() handler.Request {
	return handler.Request{
		ID:                "01JTESTTASK",
		Type:              "resize",
		Payload:           json.RawMessage(`{"w":640,"h":480}`),
		Priority:          triagetype.Low, // submitted low, promoted to high
		EffectivePriority: triagetype.High,
		Attempt:           1,
		MaxAttempts:       3,
		TraceID:           "trace-1",
	}
}

// invocation is what the fake Lambda endpoint saw of one Invoke call.
type invocation struct {
	function       string
	invocationType string
	body           []byte
}

// fakeLambda is a loopback server that speaks the Invoke REST call
// (POST /2015-03-31/functions/{FunctionName}/invocations) and answers with
// reply. It records each call.
func fakeLambda(t *testing.T, reply http.HandlerFunc) (*httptest.Server, func() []invocation) {
	t.Helper()
	var mu sync.Mutex
	var calls []invocation
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{name}/invocations", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("fake lambda: read body: %v", err)
		}
		mu.Lock()
		calls = append(calls, invocation{
			function:       r.PathValue("name"),
			invocationType: r.Header.Get("X-Amz-Invocation-Type"),
			body:           body,
		})
		mu.Unlock()
		reply(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("fake lambda: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, func() []invocation {
		mu.Lock()
		defer mu.Unlock()
		return append([]invocation(nil), calls...)
	}
}

// client is a real Lambda client aimed at srv, without retries so failures
// come back at once.
func client(srv *httptest.Server) *lambda.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
	return lambda.NewFromConfig(cfg, func(o *lambda.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.Retryer = aws.NopRetryer{}
	})
}

// functionResult answers 200 as Lambda does after running the function.
func functionResult(functionError, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amz-Executed-Version", "$LATEST")
		if functionError != "" {
			w.Header().Set("X-Amz-Function-Error", functionError)
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, body)
	}
}

// serviceError answers as Lambda does when it refuses the call. The error
// type goes in the body's __type, or in X-Amzn-ErrorType when inHeader.
func serviceError(status int, errorType, message string, inHeader bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-RequestId", "req-1")
		body := map[string]string{"message": message}
		if inHeader {
			w.Header().Set("X-Amzn-ErrorType", errorType)
		} else {
			body["__type"] = errorType
		}
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}
}

func TestHandleSendsRequestAndReturnsResult(t *testing.T) {
	srv, calls := fakeLambda(t, functionResult("", `{"echo":{"w":640,"h":480}}`))
	h := New(client(srv), testARN)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	res, err := h.Handle(ctx, testRequest())
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if string(res) != `{"echo":{"w":640,"h":480}}` {
		t.Errorf("result %s", res)
	}
	got := calls()
	if len(got) != 1 {
		t.Fatalf("%d invocations, want 1", len(got))
	}
	c := got[0]
	if c.function != testARN {
		t.Errorf("function %q, want %q", c.function, testARN)
	}
	if c.invocationType != "RequestResponse" {
		t.Errorf("X-Amz-Invocation-Type %q, want RequestResponse", c.invocationType)
	}
	var sent handler.Request
	if err := json.Unmarshal(c.body, &sent); err != nil {
		t.Fatalf("event is not a handler.Request: %v (%s)", err, c.body)
	}
	if sent.ID != "01JTESTTASK" || string(sent.Payload) != `{"w":640,"h":480}` || sent.Attempt != 1 || sent.MaxAttempts != 3 || sent.Priority != triagetype.Low || sent.EffectivePriority != triagetype.High || sent.TraceID != "trace-1" {
		t.Errorf("event %+v does not match the request", sent)
	}
	// The documented names of the two priorities in the event.
	for _, field := range []string{`"priority":"low"`, `"effective_priority":"high"`} {
		if !strings.Contains(string(c.body), field) {
			t.Errorf("event %s lacks %s", c.body, field)
		}
	}
}

func TestHandle(t *testing.T) {
	tests := []struct {
		name        string
		reply       http.HandlerFunc
		wantResult  string // compared when wantErr is false
		wantErr     bool
		permanent   bool
		errContains []string
		function    bool // the error is a *FunctionError
	}{
		{name: "success JSON", reply: functionResult("", `{"ok":true}`), wantResult: `{"ok":true}`},
		{name: "success null", reply: functionResult("", `null`), wantResult: `null`},
		{name: "success empty", reply: functionResult("", ``), wantResult: `null`},
		{name: "success not JSON", reply: functionResult("", `plain text`), wantResult: `"plain text"`},
		{
			name:        "unhandled function error",
			reply:       functionResult("Unhandled", `{"errorMessage":"boom","errorType":"Error","stackTrace":["at x"]}`),
			wantErr:     true,
			errContains: []string{testARN, "Unhandled", "Error", "boom"},
			function:    true,
		},
		{
			name:        "function timeout",
			reply:       functionResult("Unhandled", `{"errorMessage":"Task timed out after 3.00 seconds","errorType":"Sandbox.Timedout"}`),
			wantErr:     true,
			errContains: []string{"Task timed out"},
			function:    true,
		},
		{
			name:        "handled function error",
			reply:       functionResult("Handled", `{"errorMessage":"nope","errorType":"ValueError"}`),
			wantErr:     true,
			errContains: []string{"Handled", "nope"},
			function:    true,
		},
		{
			name:        "errorType Permanent",
			reply:       functionResult("Unhandled", `{"errorMessage":"bad image","errorType":"Permanent"}`),
			wantErr:     true,
			permanent:   true,
			errContains: []string{"bad image"},
			function:    true,
		},
		{
			name:        "errorType ending in PermanentError",
			reply:       functionResult("Unhandled", `{"errorMessage":"bad image","errorType":"com.example.PermanentError"}`),
			wantErr:     true,
			permanent:   true,
			errContains: []string{"com.example.PermanentError"},
			function:    true,
		},
		{
			name:        "function error payload not JSON",
			reply:       functionResult("Unhandled", strings.Repeat("z", 2000)),
			wantErr:     true,
			errContains: []string{"Unhandled", "truncated"},
			function:    true,
		},
		{
			name:        "404 ResourceNotFoundException in body",
			reply:       serviceError(404, "ResourceNotFoundException", "Function not found: "+testARN, false),
			wantErr:     true,
			permanent:   true,
			errContains: []string{"ResourceNotFoundException", "Function not found"},
		},
		{
			name:        "404 ResourceNotFoundException in header",
			reply:       serviceError(404, "ResourceNotFoundException:http://internal.amazon.com/coral/com.amazonaws.lambda/", "Function not found", true),
			wantErr:     true,
			permanent:   true,
			errContains: []string{"ResourceNotFoundException"},
		},
		{
			name:        "400 InvalidRequestContentException",
			reply:       serviceError(400, "InvalidRequestContentException", "Could not parse request body into json", false),
			wantErr:     true,
			permanent:   true,
			errContains: []string{"InvalidRequestContentException"},
		},
		{
			name:        "413 RequestTooLargeException",
			reply:       serviceError(413, "RequestTooLargeException", "Request must be smaller than 6291456 bytes", false),
			wantErr:     true,
			permanent:   true,
			errContains: []string{"RequestTooLargeException"},
		},
		{
			name:        "403 AccessDeniedException",
			reply:       serviceError(403, "AccessDeniedException", "not authorized to perform: lambda:InvokeFunction", true),
			wantErr:     true,
			permanent:   true,
			errContains: []string{"AccessDeniedException"},
		},
		{
			name:        "403 unknown code",
			reply:       serviceError(403, "SomethingNewException", "denied", false),
			wantErr:     true,
			permanent:   true,
			errContains: []string{"SomethingNewException"},
		},
		{
			name:        "429 TooManyRequestsException",
			reply:       serviceError(429, "TooManyRequestsException", "Rate Exceeded.", false),
			wantErr:     true,
			errContains: []string{"TooManyRequestsException"},
		},
		{
			name:        "409 ResourceConflictException",
			reply:       serviceError(409, "ResourceConflictException", "update in progress", false),
			wantErr:     true,
			errContains: []string{"ResourceConflictException"},
		},
		{
			name:        "500 ServiceException",
			reply:       serviceError(500, "ServiceException", "internal", false),
			wantErr:     true,
			errContains: []string{"ServiceException"},
		},
		{
			name:        "502 unknown code",
			reply:       serviceError(502, "EC2UnexpectedException", "eni", false),
			wantErr:     true,
			errContains: []string{"EC2UnexpectedException"},
		},
		{
			name:        "502 InvalidRuntimeException",
			reply:       serviceError(502, "InvalidRuntimeException", "runtime not supported", false),
			wantErr:     true,
			permanent:   true,
			errContains: []string{"InvalidRuntimeException"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := fakeLambda(t, tt.reply)
			h := New(client(srv), testARN)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()

			res, err := h.Handle(ctx, testRequest())
			if !handlertest.Check(t, res, err, handlertest.Outcome{WantResult: tt.wantResult, WantErr: tt.wantErr, Permanent: tt.permanent, ErrContains: tt.errContains}) {
				return
			}
			var fe *FunctionError
			if got := errors.As(err, &fe); got != tt.function {
				t.Errorf("errors.As(*FunctionError) = %v, want %v (err %v)", got, tt.function, err)
			}
			if len(err.Error()) > 1024 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
		})
	}
}

func TestHandleTransportFailures(t *testing.T) {
	// The slow endpoint waits for the client to give up, but never longer
	// than a few seconds, so a broken test cannot hang.
	slow, _ := fakeLambda(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := &httptest.Server{URL: "http://" + ln.Addr().String()}
	ln.Close()

	tests := []struct {
		name     string
		srv      *httptest.Server
		timeout  time.Duration
		contains string
		deadline bool
	}{
		{name: "task deadline while the function runs", srv: slow, timeout: 100 * time.Millisecond, contains: "timeout", deadline: true},
		{name: "connection refused", srv: closed, timeout: 5 * time.Second, contains: "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(client(tt.srv), testARN)
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

// stubInvoker returns a fixed output or error without any HTTP.
type stubInvoker struct {
	out *lambda.InvokeOutput
	err error
}

func (s stubInvoker) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return s.out, s.err
}

func TestHandleConfigAndStubs(t *testing.T) {
	tests := []struct {
		name      string
		h         *Handler
		permanent bool
		contains  string
	}{
		{name: "nil client", h: New(nil, testARN), permanent: true, contains: "no Lambda client"},
		{name: "empty function", h: New(stubInvoker{}, ""), permanent: true, contains: "empty function name"},
		{name: "plain error is retriable", h: New(stubInvoker{err: errors.New("socket closed")}, testARN), contains: "socket closed"},
		{name: "nil output", h: New(stubInvoker{}, testARN), contains: "no output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := tt.h.Handle(ctx, testRequest())
			if err == nil {
				t.Fatal("Handle: nil error")
			}
			if got := !handler.Retriable(err); got != tt.permanent {
				t.Errorf("permanent = %v, want %v (err %v)", got, tt.permanent, err)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q does not contain %q", err, tt.contains)
			}
		})
	}
}
