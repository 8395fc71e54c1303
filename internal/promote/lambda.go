package promote

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
)

// LambdaHandler returns the handler of the promoter function: each
// EventBridge scheduled event runs one sweep, then fans out extra consumers
// if the backlog calls for it, and returns its report. Errors of single
// tasks are counted, not returned, so one bad task does not make the
// schedule retry the whole sweep.
func LambdaHandler(p *Promoter, fan FanOut) func(context.Context, events.EventBridgeEvent) (Report, error) {
	return func(ctx context.Context, ev events.EventBridgeEvent) (Report, error) {
		r, err := p.RunOnce(ctx)
		if err != nil {
			p.log.Warn("promoter run had errors", "event_id", ev.ID, "error", err)
		}
		n, err := fan.Run(ctx)
		r.ConsumersStarted = n
		if err != nil {
			r.Errors++
			p.log.Warn("consumer fan-out failed", "error", err)
		}
		return r, nil
	}
}
