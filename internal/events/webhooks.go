package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/handler/webhook"
)

// Headers of an event delivery, besides the webhook handler kind's
// X-Triage-Task-Id, X-Triage-Timestamp and X-Triage-Signature (signed the
// same way, so a receiver checks it with webhook.Verify).
const (
	HeaderEventID   = "X-Triage-Event-Id"
	HeaderEventType = "X-Triage-Event-Type"
)

// Target is one event webhook: a URL and, optionally, the only event
// types it receives.
type Target struct {
	URL   string
	Types []Type // empty: every type
}

// ParseTargets reads TRIAGE_EVENT_WEBHOOKS: comma-separated entries, each
// a URL, or event types joined by "+" then "=" and a URL to receive only
// those, e.g. "https://a.example/all,task.completed+task.dead_lettered=https://b.example/done".
func ParseTargets(s string) ([]Target, error) {
	var out []Target
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		var t Target
		raw := entry
		if types, rest, ok := strings.Cut(entry, "="); ok && !strings.Contains(types, "://") {
			raw = rest
			for name := range strings.SplitSeq(types, "+") {
				typ, err := ParseType(strings.TrimSpace(name))
				if err != nil {
					return nil, err
				}
				t.Types = append(t.Types, typ)
			}
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%q is not an http(s) URL", redact(raw))
		}
		t.URL = raw
		out = append(out, t)
	}
	return out, nil
}

// Webhooks is the Sink that POSTs each event, as JSON, to every target
// that takes its type, signed like the webhook handler kind's requests.
// Each target gets the batch's events one at a time, in order, so a
// receiver sees one task's events in the order they happened; targets
// are served concurrently. A delivery that fails in a way a later try can
// fix (a network error, 408, 429, 5xx) is tried Attempts times; if it
// still fails, that target's remaining events are not sent (they would
// overtake it) and Publish fails, so the batch is delivered again. A
// receiver that refuses an event (another 3xx or 4xx) will refuse it
// again: that event is logged and skipped.
type Webhooks struct {
	targets []Target
	secret  []byte
	opt     WebhookOptions
}

// WebhookOptions tunes deliveries; zero values take the defaults.
type WebhookOptions struct {
	Client   *http.Client     // default: 10 s timeout, redirects not followed
	Attempts int              // tries per event (3)
	Backoff  time.Duration    // wait after the first failed try, doubling (250 ms)
	Now      func() time.Time // the signature's clock
	Logger   *slog.Logger
}

// NewWebhooks returns the sink for targets, signing with secret
// (TRIAGE_WEBHOOK_SECRET). An empty secret is an error: events are never
// sent unsigned.
func NewWebhooks(targets []Target, secret []byte, opt WebhookOptions) (*Webhooks, error) {
	if len(secret) == 0 {
		return nil, errors.New("event webhooks need a signing secret (TRIAGE_WEBHOOK_SECRET)")
	}
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opt.Attempts <= 0 {
		opt.Attempts = 3
	}
	if opt.Backoff <= 0 {
		opt.Backoff = 250 * time.Millisecond
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Webhooks{targets: targets, secret: bytes.Clone(secret), opt: opt}, nil
}

// Publish delivers evs to every target (see Webhooks).
func (w *Webhooks) Publish(ctx context.Context, evs []Event) error {
	errs := make([]error, len(w.targets))
	var wg sync.WaitGroup
	for i, t := range w.targets {
		wg.Go(func() { errs[i] = w.publishTo(ctx, t, evs) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *Webhooks) publishTo(ctx context.Context, t Target, evs []Event) error {
	f := Filter{Types: t.Types}
	for _, e := range evs {
		if !f.Match(e) {
			continue
		}
		err := w.deliver(ctx, t.URL, e)
		var refused *refusedError
		if errors.As(err, &refused) {
			w.opt.Logger.Error("event webhook refused an event; skipped", "url", redact(t.URL), "event_id", e.ID, "type", e.Type, "error", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("webhook %s, event %s: %w", redact(t.URL), e.ID, err)
		}
	}
	return nil
}

// refusedError is a response a retry will not change.
type refusedError struct{ status int }

func (e *refusedError) Error() string { return fmt.Sprintf("status %d", e.status) }

// deliver POSTs e to u, trying again after failures a later try can fix.
func (w *Webhooks) deliver(ctx context.Context, u string, e Event) error {
	body, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	wait := w.opt.Backoff
	for try := 1; ; try++ {
		err = w.post(ctx, u, e, body)
		var refused *refusedError
		if err == nil || errors.As(err, &refused) || try >= w.opt.Attempts {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait *= 2
	}
}

func (w *Webhooks) post(ctx context.Context, u string, e Event, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return &refusedError{}
	}
	ts := strconv.FormatInt(w.opt.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "triage-events/1")
	req.Header.Set(HeaderEventID, e.ID)
	req.Header.Set(HeaderEventType, string(e.Type))
	req.Header.Set(webhook.HeaderTaskID, e.TaskID)
	req.Header.Set(webhook.HeaderTimestamp, ts)
	req.Header.Set(webhook.HeaderSignature, webhook.Sign(w.secret, ts, body))
	resp, err := w.opt.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text repeats the URL, query and all
		}
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return fmt.Errorf("status %d", c)
	default:
		return &refusedError{status: c}
	}
}

// redact drops a URL's credentials and query, which may hold secrets.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
