package main

import (
	"fmt"
	"strings"
)

// This file bills the functions for AWS's latencies, not the emulators':
// a function's billed time per task is its own CPU time (measured on a
// full core, stretched to the function's CPU share: cpuScale) plus, for every
// AWS call it makes per task, the latency that call has on AWS (the table
// below), as if the calls ran one after another. That is an upper bound:
// the consumer's slots run tasks side by side within one invocation, so
// their waits overlap. The emulators' latencies (DynamoDB Local answers a
// conditional write in 5 to 20 ms on two shared cores) say nothing about
// AWS and are not used.

// oneVCPUMB is the memory size at which a Lambda function has the
// equivalent of one vCPU; CPU is allocated in proportion to memory
// (AWS Lambda developer guide, "Configure Lambda function memory").
const oneVCPUMB = 1769

// cpuScale is how much longer CPU-bound work measured on a full core takes
// in a function of mb megabytes: 1769/mb, at least 1.
func cpuScale(mb int) float64 {
	if mb <= 0 || mb >= oneVCPUMB {
		return 1
	}
	return float64(oneVCPUMB) / float64(mb)
}

// cpuShareNote states the CPU scaling in the cost assumptions.
const cpuShareNote = "CPU measured on a full core, stretched by 1769 MB / the function's memory (Lambda's CPU share)"

// CallLatency is the AWS-like latency assumed for one operation.
type CallLatency struct {
	Op     string  `json:"op"` // "<service> <operation>"
	Millis float64 `json:"ms"`
}

// defaultCallMillis is the latency assumed for an operation missing from
// the table.
const defaultCallMillis = 10.0

// latencySource states where the table's figures come from.
const latencySource = "assumed in-region client-side latencies (request to response, TLS connection reused): " +
	"DynamoDB is documented as single-digit milliseconds at any scale, and its CloudWatch SuccessfulRequestLatency " +
	"for small items is typically 2-5 ms for reads and 4-8 ms for writes, plus about 1 ms of client and network; " +
	"SQS standard queues answer in the low tens of milliseconds (AWS's SQS developer guide, 'low latency'; " +
	"commonly measured 5-15 ms for sends, receives and deletes in-region); S3 small-object requests take tens of milliseconds. " +
	"An operation not listed is billed " + "10 ms"

// awsCallLatencies is the table of assumed per-call latencies on AWS.
func awsCallLatencies() []CallLatency {
	return []CallLatency{
		{"DynamoDB GetItem", 4},
		{"DynamoDB Query", 6},
		{"DynamoDB BatchGetItem", 6},
		{"DynamoDB PutItem", 6},
		{"DynamoDB UpdateItem", 6},
		{"DynamoDB DeleteItem", 6},
		{"DynamoDB BatchWriteItem", 10},
		{"DynamoDB TransactWriteItems", 12},
		{"DynamoDB DescribeTable", 5},
		{"SQS SendMessage", 10},
		{"SQS SendMessageBatch", 12},
		{"SQS ReceiveMessage", 10},
		{"SQS DeleteMessage", 8},
		{"SQS DeleteMessageBatch", 10},
		{"SQS ChangeMessageVisibility", 8},
		{"SQS ChangeMessageVisibilityBatch", 10},
		{"SQS GetQueueAttributes", 8},
		{"S3 PutObject", 40},
		{"S3 GetObject", 25},
		{"S3 DeleteObject", 20},
	}
}

// callMillis is the assumed AWS latency of op ("<service> <operation>",
// a target in brackets ignored).
func callMillis(table []CallLatency, op string) float64 {
	op, _, _ = strings.Cut(op, " [")
	for _, c := range table {
		if c.Op == op {
			return c.Millis
		}
	}
	return defaultCallMillis
}

// awsSeconds is what a function waits on AWS per task for the calls of p:
// every call's attempts per task times its assumed latency. Calls the
// function does not make itself (DynamoDB Streams reads, made by the
// Lambda trigger) are left out.
func awsSeconds(p Phase, table []CallLatency) float64 {
	ms := 0.0
	for _, o := range p.Ops {
		if strings.HasPrefix(o.Op, svcStreams) {
			continue
		}
		ms += max(o.Attempts, o.PerTask) * callMillis(table, o.Op)
	}
	return ms / 1000
}

// Provisioned capacity: a table (and its indexes) with provisioned write
// and read capacity under auto scaling, held at targetUtilization, pays
// for the provisioned units by the hour whether used or not, so a used
// unit costs the hourly price divided by the share used.
const (
	provisionedWCUHour    = 0.00065 // USD per WCU-hour, us-east-1
	provisionedRCUHour    = 0.00013 // USD per RCU-hour, us-east-1
	provisionedTargetUtil = 0.70    // the construct's auto-scaling target
)

// provisionedPerMillion is the price of a million used units at the
// auto-scaling target utilisation: a million units a second-spread is
// 1e6/3600 unit-hours, at util of what is provisioned.
func provisionedPerMillion(hourly float64) float64 {
	return 1e6 / 3600 / provisionedTargetUtil * hourly
}

// The cost targets (issue 28): direct sends, all in, per million no-op
// tasks, on on-demand DynamoDB and with provisioned capacity.
const (
	targetDirectCostOnDemand    = 2.75
	targetDirectCostProvisioned = 1.50
	targetDirectWriteUnits      = 4.0 // billed write units per no-op task
	targetDirectSQSRequests     = 0.3 // SQS requests per task under load
)

// latencyAssumption is the cost table's note on the latency model.
func latencyAssumption(table []CallLatency) string {
	parts := make([]string, 0, len(table))
	for _, c := range table {
		parts = append(parts, fmt.Sprintf("%s %.0f ms", c.Op, c.Millis))
	}
	return "λ billed time = the function's own CPU time × 1769 MB / its memory + its AWS calls per task × their AWS latency, as if serial (an upper bound: slots overlap their waits); latencies: " +
		strings.Join(parts, ", ") + "; " + latencySource
}
