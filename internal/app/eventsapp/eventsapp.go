// Package eventsapp attaches lifecycle event delivery (internal/events) to
// an app.App's stream consumer: the counters function's main and `triage
// dev` build it here from the same settings, so an event goes to the same
// places wherever the stream is read.
package eventsapp

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/events"
	"github.com/triagehq/triage/internal/events/eventbus"
	"github.com/triagehq/triage/triageconfig"
)

// Attach builds the sinks the settings name (TRIAGE_EVENT_WEBHOOKS, signed
// with TRIAGE_WEBHOOK_SECRET; TRIAGE_EVENT_BUS, an EventBridge bus) plus extra (the dev server's SSE broker) and
// makes a's counters consumer publish every batch to them. With no sink at
// all nothing is attached: the counters run exactly as before.
func Attach(a *app.App, getenv func(string) string, extra ...events.Sink) (*events.Fanout, error) {
	sinks := append([]events.Sink(nil), extra...)
	if v := getenv(triageconfig.EnvEventWebhooks); v != "" {
		targets, err := events.ParseTargets(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", triageconfig.EnvEventWebhooks, err)
		}
		wh, err := events.NewWebhooks(targets, []byte(a.Config.WebhookSecret), events.WebhookOptions{Logger: a.Log})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", triageconfig.EnvEventWebhooks, err)
		}
		sinks = append(sinks, wh)
	}
	if bus := getenv(triageconfig.EnvEventBus); bus != "" {
		sinks = append(sinks, eventbus.New(eventbridge.NewFromConfig(a.AWS), bus))
	}
	f := events.NewFanout(sinks...)
	if f.Len() > 0 {
		a.Counters.Publish(f, 0, a.Log)
	}
	return f, nil
}
