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
//	tr, err := direct.New(ctx, awsCfg, direct.Options{Config: &cfg}) // nil Config: the TRIAGE_* environment
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
// # Names
//
// The wire types are defined once, in package triagetype. This package
// re-exports only the nine a caller writes out by name, so a program that
// submits, waits and checks errors needs one import:
//
//   - Task, the answer of a submit and of every read of a task;
//   - SubmitRequest, what NewRequest builds and SubmitBatch takes;
//   - Priority with High, Medium and Low, and Status with its constants;
//   - Error, with the sentinels it matches (ErrBadRequest, ErrTooMany, ...);
//   - WorkflowRequest, WorkflowNode, BatchCreate and Schedule, the bodies a
//     caller builds for SubmitWorkflow, CreateBatch and PutSchedule.
//
// Everything else (TaskPage, Stats, Workflow, Batch, the control, DLQ and
// worker answers) is only received, and is named triagetype.X. The
// package lives apart because triage's internal packages use the same
// definitions and cannot import this package (the direct transport imports
// them), so a task travels from the store to a caller by a Go conversion,
// never through JSON.
//
// Client's methods are named by one rule: a call on the task itself is a
// bare verb (Submit, Get, Wait, List, ListAll, Cancel, Retry, Delete); any
// other is a verb and the noun it acts on, Get for one, List for many
// (SubmitBatch, SubmitArgs, GetBatch, GetWorkflow, GetSchedule,
// ListSchedules, ListWorkers, ListControls, ListDLQ, GetStats,
// StartCleanup, PauseType, PauseSchedule, SetLimits, SetKeyControls, ...).
// A method takes the same struct its Transport method does
// (SetLimits takes a triagetype.LimitsRequest). Transport's methods carry
// the same names, except that it sets a pause with one call, SetPaused
// (SetSchedulePaused), where Client has PauseType and ResumeType
// (PauseSchedule and ResumeSchedule).
//
// Settings are named by one rule too: a struct of settings is Options (or
// XxxOptions: direct.Options, worker.Options, workertest.WorkOptions), a
// functional option is XxxOption (HTTPOption, SubmitOption), and the
// filter of a listing is ListParams.
//
// # Transports
//
// The HTTP transport lives here. Outside the standard library this package
// depends only on triagetype, two small internal packages (the task rules
// and the token header's name) and github.com/oklog/ulid. The direct
// transport lives in package direct so that a program that only talks HTTP
// does not link the AWS SDK.
//
// A deployment's settings are one struct, triageconfig.Config (River's
// style: fields document their defaults; WithDefaults, then Validate; a
// broken rule is a *triageconfig.Error naming the field and its variable),
// which worker.New and direct.New both take in their Options (a nil Config
// reads the TRIAGE_* variables, triageconfig.Decode) and the dispatcher's
// own functions read from their environment. Per-call choices are
// functional options: HTTPOption for the HTTP transport, SubmitOption for
// a submit. Plain structs carry data (wire types and ListParams).
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
