// Package webhook is the handler kind that runs a task by POSTing it to an
// HTTP endpoint, so a handler can live in any service that speaks HTTP.
//
// The body is the handler.Request as JSON, including the attempt's
// progress_token (and progress_url) for reporting progress to the API,
// the task's last checkpoint, and both priorities: priority, the one the
// task was submitted with, and effective_priority, the one this attempt
// runs at (higher once the promoter moved the task). Because the endpoint is usually
// reachable from outside, every request is signed Stripe-style: the
// X-Triage-Signature header carries "v1=<hex HMAC-SHA256>" computed over
// "<timestamp>.<body>", with the timestamp sent in X-Triage-Timestamp. Signing
// the timestamp lets a receiver refuse replays of an old request; Verify does
// both checks and is what receivers written in Go should call.
//
// The HTTP status decides the outcome:
//
//   - 2xx: success. A JSON response body is the task's result; an empty body
//     is null; any other body is wrapped as a JSON string.
//   - 408 and 429: retriable. They mean "timed out" and "slow down", which a
//     later attempt (after the dispatcher's backoff) can fix.
//   - other 4xx: permanent (handler.Permanent). The endpoint refused this
//     request and sending it again will not change its mind.
//   - 3xx: permanent. Redirects are not followed: a signed POST should not be
//     replayed to a place nobody configured, so the route must be fixed.
//   - 5xx, network errors and the task deadline: retriable.
//
// Durable steps: the body also carries the task's recorded "steps" and
// delivered "signals", and a 2xx JSON object with the field
// durable.ResponseField ("triage_durable") records steps, sleeps, waits
// for a signal or asks to be POSTed again (package durable's Drive;
// docs/durable.md states the protocol).
//
// The request runs under the context passed to Handle, which carries the
// task's deadline; the default HTTP client has no timeout of its own.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/handler"
)

// Header names set on every webhook request.
const (
	HeaderTaskID    = "X-Triage-Task-Id"
	HeaderAttempt   = "X-Triage-Attempt"
	HeaderTimestamp = "X-Triage-Timestamp"
	HeaderSignature = "X-Triage-Signature"
)

// signatureVersion prefixes the hex digest in the signature header, so the
// scheme can change without ambiguity.
const signatureVersion = "v1"

// DefaultTolerance is the timestamp tolerance Verify uses when it is given
// zero or less: wide enough for clock skew, narrow enough to limit replays.
const DefaultTolerance = 5 * time.Minute

// MaxResponseBytes is the most of a response body Handle reads. A larger
// 2xx body is an error, since a truncated result would be wrong.
const MaxResponseBytes = 1 << 20

// maxErrorBody is how much of an error response goes into the error text.
const maxErrorBody = 512

// Errors that Verify wraps, for receivers that answer differently to a bad
// signature and a stale request.
var (
	ErrBadSignature = errors.New("webhook signature mismatch")
	ErrBadTimestamp = errors.New("webhook timestamp invalid or outside tolerance")
)

// Handler runs tasks by POSTing them to one URL.
type Handler struct {
	url    string
	urlErr error  // why url is unusable, if it is
	shown  string // url without query or credentials, for error messages
	secret []byte
	client *http.Client
	now    func() time.Time
}

// Option configures a Handler.
type Option func(*Handler)

// WithHTTPClient sets the HTTP client. Its redirect policy is the caller's
// choice; the default client does not follow redirects.
func WithHTTPClient(c *http.Client) Option {
	return func(h *Handler) {
		if c != nil {
			h.client = c
		}
	}
}

// WithClock sets the clock that stamps requests (for tests).
func WithClock(now func() time.Time) Option {
	return func(h *Handler) {
		if now != nil {
			h.now = now
		}
	}
}

// New returns a handler that POSTs tasks to rawURL, signed with secret. An
// empty secret or a bad URL is reported by Handle as a permanent error, so a
// misconfigured route fails its tasks visibly instead of sending them
// unsigned.
func New(rawURL string, secret []byte, opts ...Option) *Handler {
	h := &Handler{
		url:    rawURL,
		shown:  redact(rawURL),
		secret: bytes.Clone(secret),
		client: &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: time.Now,
	}
	if u, err := url.Parse(rawURL); err != nil {
		h.urlErr = errors.New("invalid URL")
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		h.urlErr = errors.New("invalid URL: want http:// or https:// and a host")
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Handle POSTs r to the handler's URL and maps the response to a result or
// an error as the package documentation describes. A response that is a
// durable directive (durable.ResponseField) records steps, sleeps or
// waits, and may have the attempt POST again (durable.Drive).
func (h *Handler) Handle(ctx context.Context, r handler.Request) (json.RawMessage, error) {
	if h.urlErr != nil {
		return nil, handler.Permanent(fmt.Errorf("webhook %s: %w", h.shown, h.urlErr))
	}
	if len(h.secret) == 0 {
		return nil, handler.Permanent(fmt.Errorf("webhook %s: empty signing secret", h.shown))
	}
	return durable.Drive(ctx, r.Durable, r.Attempt, func(ctx context.Context, recs durable.Records) (json.RawMessage, error) {
		return h.post(ctx, r, recs)
	}, handler.Permanent)
}

// post makes one POST of r with the task's records recs.
func (h *Handler) post(ctx context.Context, r handler.Request, recs durable.Records) (json.RawMessage, error) {
	body, err := json.Marshal(struct {
		handler.Request
		durable.Records
	}{r, recs})
	if err != nil {
		return nil, handler.Permanent(fmt.Errorf("webhook %s: encode request: %w", h.shown, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, handler.Permanent(fmt.Errorf("webhook %s: %w", h.shown, err))
	}
	ts := strconv.FormatInt(h.now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "triage-webhook/1")
	req.Header.Set(HeaderTaskID, r.ID)
	req.Header.Set(HeaderAttempt, strconv.Itoa(r.Attempt))
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(h.secret, ts, body))
	if r.Traceparent != "" {
		req.Header.Set("traceparent", r.Traceparent) // W3C trace context: the attempt's span
	}

	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.transportError(ctx, err)
	}
	defer resp.Body.Close()

	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, h.transportError(ctx, fmt.Errorf("status %d: read body: %w", resp.StatusCode, err))
	}
	tooLarge := len(data) > MaxResponseBytes
	if tooLarge {
		data = data[:MaxResponseBytes]
	}

	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		if tooLarge {
			return nil, handler.Permanent(fmt.Errorf("webhook %s: status %d: response body exceeds %d bytes", h.shown, code, MaxResponseBytes))
		}
		return result(data), nil
	case code == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
		// The upstream says when: the task's scope waits until then, and
		// the attempt is not spent.
		if at, ok := handler.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			scope, err := handler.ParseRetryScope(resp.Header.Get(handler.HeaderRetryScope))
			if err == nil {
				return nil, handler.RetryAfter(at, scope)
			}
		}
		return nil, fmt.Errorf("webhook %s: status %d (retriable): %s", h.shown, code, snippet(data))
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
		return nil, fmt.Errorf("webhook %s: status %d (retriable): %s", h.shown, code, snippet(data))
	case code >= 300 && code < 500:
		if code < 400 {
			return nil, handler.Permanent(fmt.Errorf("webhook %s: status %d: redirect to %q not followed", h.shown, code, redact(resp.Header.Get("Location"))))
		}
		return nil, handler.Permanent(fmt.Errorf("webhook %s: status %d: %s", h.shown, code, snippet(data)))
	default:
		return nil, fmt.Errorf("webhook %s: status %d: %s", h.shown, code, snippet(data))
	}
}

// transportError describes a failure with no usable response. All of them are
// retriable; a deadline is named as a timeout so the task's history says so.
func (h *Handler) transportError(ctx context.Context, err error) error {
	// *url.Error repeats the full URL, query included; the handler already
	// names the redacted one.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("webhook %s: timeout: %w", h.shown, err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("webhook %s: timeout: %w: %w", h.shown, ctx.Err(), err)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("webhook %s: timeout: %w", h.shown, err)
	}
	return fmt.Errorf("webhook %s: %w", h.shown, err)
}

// result turns a 2xx body into the task result.
func result(data []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(trimmed) {
		return json.RawMessage(trimmed)
	}
	s, _ := json.Marshal(string(data)) // a string always marshals
	return s
}

// snippet is the start of an error body, for an error message.
func snippet(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "(empty body)"
	}
	if len(data) > maxErrorBody {
		return strings.ToValidUTF8(string(data[:maxErrorBody]), "") + "…(truncated)"
	}
	return strings.ToValidUTF8(string(data), "\uFFFD")
}

// redact drops a URL's credentials and query, which may hold secrets, so it
// can go into task errors that API clients read.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.ForceQuery = false
	u.Fragment = ""
	u.RawFragment = ""
	return u.String()
}

// Sign returns the X-Triage-Signature value for body sent at timestamp (unix
// seconds as a decimal string): "v1=" and the hex HMAC-SHA256 of
// "<timestamp>.<body>" under secret.
func Sign(secret []byte, timestamp string, body []byte) string {
	return signatureVersion + "=" + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a webhook request as a receiver gets it: timestamp is the
// X-Triage-Timestamp header, body the raw request body (before any JSON
// decoding), signature the X-Triage-Signature header. It fails if the
// timestamp is more than tolerance away from now in either direction (zero
// or less means DefaultTolerance), or if no "v1=" entry of signature (entries
// may be comma-separated, to allow for secret rotation) matches. The digest
// comparison is constant-time. Errors wrap ErrBadTimestamp or
// ErrBadSignature.
func Verify(secret []byte, timestamp string, body []byte, signature string, now time.Time, tolerance time.Duration) error {
	if len(secret) == 0 {
		return fmt.Errorf("%w: empty secret", ErrBadSignature)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(timestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not unix seconds", ErrBadTimestamp, timestamp)
	}
	age := now.Sub(time.Unix(sec, 0))
	switch {
	case age > tolerance:
		return fmt.Errorf("%w: %s old, tolerance %s", ErrBadTimestamp, age.Truncate(time.Second), tolerance)
	case -age > tolerance:
		return fmt.Errorf("%w: %s in the future, tolerance %s", ErrBadTimestamp, (-age).Truncate(time.Second), tolerance)
	}

	want := mac(secret, timestamp, body)
	found := false
	for part := range strings.SplitSeq(signature, ",") {
		version, digest, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || version != signatureVersion {
			continue
		}
		found = true
		got, err := hex.DecodeString(digest)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	if !found {
		return fmt.Errorf("%w: no %s= entry in signature header", ErrBadSignature, signatureVersion)
	}
	return fmt.Errorf("%w: digest does not match body and timestamp", ErrBadSignature)
}
