package dispatch

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// LambdaSummary is what one scheduled consumer invocation reports.
type LambdaSummary struct {
	WorkerID string `json:"worker_id"`
	PolledMS int64  `json:"polled_ms"`
}

// LambdaHandler returns the handler of the consumer function. Invoked on a
// schedule, it polls until reserve before the invocation's deadline, then
// drains: running tasks get until DrainTimeout to finish, and any still
// running after that are handed back to their queue, so the function never
// freezes with a claimed task. reserve must exceed DrainTimeout.
func LambdaHandler(c *Consumer, reserve time.Duration) func(context.Context, events.EventBridgeEvent) (LambdaSummary, error) {
	return func(ctx context.Context, _ events.EventBridgeEvent) (LambdaSummary, error) {
		start := time.Now()
		pollCtx := ctx
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			pollCtx, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
			defer cancel()
		}
		err := c.Run(pollCtx)
		return LambdaSummary{WorkerID: c.WorkerID(), PolledMS: time.Since(start).Milliseconds()}, err
	}
}
