// Package triage is the Go client of triage, a serverless priority task
// dispatcher for AWS: submit tasks, read and cancel them, and operate the
// dispatcher (pause, limits, dead letters, stats).
//
// One Client works over either of two transports, with the same methods,
// the same idempotency, the same validation (errors name the field at
// fault) and the same backpressure:
//
//	// Anywhere, through the HTTP API:
//	c := triage.NewClient(triage.HTTP("https://triage.example.com", token))
//
//	// Inside AWS next to the dispatcher, writing DynamoDB and SQS itself
//	// (package github.com/triagehq/triage/direct):
//	tr, err := direct.New(ctx, awsCfg, "triage")
//	c := triage.NewClient(tr)
//
//	task, created, err := c.Submit(ctx, "resize", img, triage.WithPriority(triage.High))
//	if errors.Is(err, triage.ErrTooMany) { /* the queue is over its depth limit */ }
//
// Each transport has one plain and one typed way to submit: Submit and
// SubmitBatch take the task type as a string, SubmitArgs and
// SubmitArgsBatch take it from the payload's Kind method (Args, River's
// JobArgs), the same interface package worker's AddWorker registers a
// handler by:
//
//	type Resize struct{ URL string }
//	func (Resize) Kind() string { return "resize" }
//
//	task, created, err := c.SubmitArgs(ctx, Resize{URL: u}, triage.WithPriority(triage.High))
//
// # Design
//
// The vocabulary (Task, Priority, Status, SubmitRequest, the API's answers
// and errors) is defined once, in package triagetype, and re-exported here
// by alias, the way river re-exports rivertype. It lives in its own leaf
// package because triage's internal packages use the same definitions
// (internal/task's Priority and Status are aliases of these, its Request a
// defined type over SubmitRequest), and this package cannot be imported by
// them: the direct transport imports them. So a task travels from the
// store to a caller by a Go conversion, never through JSON, and there is
// one definition of each wire type.
//
// The HTTP transport lives here. Outside the standard library this package
// depends only on triagetype, three small internal packages (the task
// rules, the token header's name, and the settings behind Config) and
// github.com/oklog/ulid. The direct
// transport lives in package direct so that a program that only talks HTTP
// does not link the AWS SDK.
//
// A deployment's settings are one struct, Config (River's style: fields
// document their defaults; WithDefaults, then Validate), which the worker
// takes and ConfigFromEnv decodes from TRIAGE_* variables. Per-call
// choices are functional options: HTTPOption for the HTTP transport,
// SubmitOption for a submit, direct.Option for the direct transport.
// Plain structs carry data (wire types and ListParams).
//
// Every method takes a context first. Every failure the API answers with
// is an *Error that matches one sentinel with errors.Is (ErrNotFound,
// ErrBadRequest, ErrTooMany, ...) and carries the code, the message, the
// field at fault and the Retry-After. Wait returns the finished task, and
// with it an error matching ErrDeadLettered or ErrCancelled when the task
// ended without completing.
//
// Handlers are run by package worker (your own consumer with Go handlers)
// and tested without AWS by package workertest.
package triage
