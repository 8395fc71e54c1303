package promote

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// Invoker starts a Lambda function (the consumer).
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Depths reads queue depths.
type Depths interface {
	Depth(ctx context.Context, p triagetype.Priority) (queue.Depth, error)
}

// FanOut starts extra consumer invocations when the backlog outgrows the
// scheduled consumers: one per PerConsumer visible messages, at most Max
// per promoter run. In AWS the promoter function runs it after each sweep;
// locally there is no function to start.
type FanOut struct {
	Invoker     Invoker
	Depths      Depths
	FunctionARN string
	PerConsumer int // visible messages one extra consumer is started for (triageconfig.DefaultFanOutPer when 0)
	Max         int // extra consumers per run at most (0: none; the assembly passes triageconfig.Config's)
}

// Run starts the extra consumers and returns how many it started.
func (f FanOut) Run(ctx context.Context) (int, error) {
	if f.FunctionARN == "" || f.Invoker == nil {
		return 0, nil
	}
	per, most := f.PerConsumer, f.Max
	if per <= 0 {
		per = triageconfig.DefaultFanOutPer
	}
	if most <= 0 {
		return 0, nil
	}
	backlog := 0
	for _, p := range triagetype.Priorities() {
		d, err := f.Depths.Depth(ctx, p)
		if err != nil {
			return 0, err
		}
		backlog += d.Visible
	}
	n := min(most, backlog/per)
	for i := range n {
		_, err := f.Invoker.Invoke(ctx, &lambda.InvokeInput{
			FunctionName:   aws.String(f.FunctionARN),
			InvocationType: types.InvocationTypeEvent,
			Payload:        []byte(`{"source":"triage.promoter","detail-type":"fan-out"}`),
		})
		if err != nil {
			return i, fmt.Errorf("start consumer %s: %w", f.FunctionARN, err)
		}
	}
	return n, nil
}
