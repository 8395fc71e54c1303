// Package lambdainvoke is the handler kind that runs a task by invoking an
// AWS Lambda function synchronously, so handlers can be written in any
// language Lambda runs, and deployed and scaled apart from the dispatcher.
//
// The function's event is the handler.Request as JSON (id, type, payload,
// priority, effective_priority, attempt, max_attempts, trace_id,
// checkpoint, and the progress_token and progress_url it reports progress
// with through the API); priority is the one submitted, effective_priority
// the one the attempt runs at (higher once the promoter moved the task).
// What it returns is the task's
// result. A return value that is not JSON (which Lambda allows for some
// runtimes) is wrapped as a JSON string.
//
// The event also carries the task's recorded "steps" and delivered
// "signals"; a result object with the field durable.ResponseField
// ("triage_durable") records steps, sleeps, waits for a signal or asks to
// be invoked again, as a webhook's does (docs/durable.md).
//
// Failures are sorted into retriable and permanent (handler.Permanent):
//
//   - The function failed (the X-Amz-Function-Error header, "Unhandled" or
//     "Handled"): retriable, because crashes, timeouts and out-of-memory
//     kills are often transient. A function marks a failure as permanent by
//     raising an error whose type (Lambda's errorType) is "Permanent" or ends
//     in "PermanentError" — for example a Python class PermanentError, a Go
//     type *PermanentError, or a Java com.example.PermanentError.
//   - Lambda refused the call: throttling (429 TooManyRequestsException),
//     service and 5xx errors, and functions not ready yet are retriable; a
//     missing function, a bad or oversized request and denied access (the
//     other 4xx) are permanent, since retrying the same call cannot help.
//   - The task deadline (the context passed to Handle) or a network failure:
//     retriable; a deadline is reported as a timeout.
//
// The Lambda client is built the usual way (config.LoadDefaultConfig), so
// the SDK's AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_LAMBDA variables redirect
// it without code changes. LocalStack runs real Lambda functions in Docker
// containers, so on a machine with Docker this handler kind can be exercised
// end to end by pointing those variables at LocalStack. The package's own
// tests use a loopback server that speaks the Invoke wire protocol instead.
package lambdainvoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/handler"
)

// Invoker is the part of *lambda.Client the handler uses; tests can supply
// their own.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// PermanentErrorType is the errorType a function raises to say retrying
// cannot help; any errorType ending in "PermanentError" says the same.
const PermanentErrorType = "Permanent"

// maxMessage bounds how much of an unparseable error payload goes into an
// error message.
const maxMessage = 512

// Handler runs tasks by invoking one Lambda function.
type Handler struct {
	client Invoker
	arn    string
}

// New returns a handler that invokes functionARN (a function name, a full
// or partial ARN, optionally with a version or alias qualifier) with client.
func New(client Invoker, functionARN string) *Handler {
	return &Handler{client: client, arn: functionARN}
}

// Handle invokes the function with r as its event and waits for the
// result. A result that is a durable directive (durable.ResponseField)
// records steps, sleeps or waits, and may have the attempt invoke the
// function again (durable.Drive), as webhooks do.
func (h *Handler) Handle(ctx context.Context, r handler.Request) (json.RawMessage, error) {
	if h.client == nil {
		return nil, handler.Permanent(fmt.Errorf("invoke %s: no Lambda client", h.arn))
	}
	if h.arn == "" {
		return nil, handler.Permanent(errors.New("invoke: empty function name"))
	}
	return durable.Drive(ctx, r.Durable, r.Attempt, func(ctx context.Context, recs durable.Records) (json.RawMessage, error) {
		return h.invoke(ctx, r, recs)
	}, handler.Permanent)
}

// invoke makes one invocation with r and the task's records recs.
func (h *Handler) invoke(ctx context.Context, r handler.Request, recs durable.Records) (json.RawMessage, error) {
	payload, err := json.Marshal(struct {
		handler.Request
		durable.Records
	}{r, recs})
	if err != nil {
		return nil, handler.Permanent(fmt.Errorf("invoke %s: encode request: %w", h.arn, err))
	}
	out, err := h.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   &h.arn,
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        payload,
	})
	if err != nil {
		return nil, h.callError(ctx, err)
	}
	if out == nil {
		return nil, fmt.Errorf("invoke %s: no output", h.arn)
	}
	if out.FunctionError != nil {
		fe := parseFunctionError(*out.FunctionError, out.Payload)
		err := fmt.Errorf("invoke %s: %w", h.arn, fe)
		if fe.Permanent() {
			return nil, handler.Permanent(err)
		}
		return nil, err
	}
	if err := handler.LambdaRetryAfter(out.Payload, time.Now()); err != nil {
		return nil, err
	}
	return result(out.Payload), nil
}

// FunctionError is the failure of an invocation that ran the function:
// Lambda's {"errorMessage", "errorType"} payload.
type FunctionError struct {
	Kind    string // X-Amz-Function-Error: "Unhandled" or "Handled"
	Type    string // errorType; empty if the payload had none
	Message string // errorMessage, or the start of an unparseable payload
}

func (e *FunctionError) Error() string {
	var b strings.Builder
	b.WriteString("function error")
	if e.Kind != "" {
		b.WriteString(" (" + e.Kind + ")")
	}
	if e.Type != "" {
		b.WriteString(" " + e.Type)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Permanent reports whether the function marked the error as not worth
// retrying (see PermanentErrorType).
func (e *FunctionError) Permanent() bool {
	return e.Type == PermanentErrorType || strings.HasSuffix(e.Type, "PermanentError")
}

func parseFunctionError(kind string, payload []byte) *FunctionError {
	fe := &FunctionError{Kind: kind}
	var body struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if err := json.Unmarshal(payload, &body); err == nil && (body.ErrorMessage != "" || body.ErrorType != "") {
		fe.Type, fe.Message = body.ErrorType, body.ErrorMessage
		return fe
	}
	fe.Message = truncate(string(bytes.TrimSpace(payload)))
	return fe
}

// retriableCode reports whether a Lambda error code means a later attempt
// can succeed.
func retriableCode(code string) bool {
	switch code {
	case "TooManyRequestsException", // 429: throttled
		"ThrottlingException",
		"ServiceException",          // 500
		"ResourceNotReadyException", // the function is still being created
		"ResourceConflictException", // 409: an update is in progress
		"EC2ThrottledException",
		"ENILimitReachedException",
		"SubnetIPAddressLimitReachedException",
		"EFSMountConnectivityException",
		"EFSMountTimeoutException",
		"EFSIOException",
		"SnapStartNotReadyException",
		"SnapStartTimeoutException",
		"RequestTimeout",
		"RequestTimeoutException":
		return true
	}
	return false
}

// permanentCode reports whether a Lambda error code means the same call will
// keep failing. Codes that are neither retriable nor permanent are decided
// by their HTTP status.
func permanentCode(code string) bool {
	switch code {
	case "ResourceNotFoundException", // 404
		"InvalidRequestContentException", // 400
		"InvalidParameterValueException", // 400
		"RequestTooLargeException",       // 413
		"SerializedRequestEntityTooLargeException",
		"UnsupportedMediaTypeException",
		"RecursiveInvocationException",
		"AccessDeniedException",
		"AccessDenied",
		"UnrecognizedClientException",
		"InvalidSignatureException",
		// The rest are 502s, but they are faults in the function's
		// configuration that no retry fixes.
		"InvalidRuntimeException",
		"InvalidZipFileException",
		"InvalidSecurityGroupIDException",
		"InvalidSubnetIDException",
		"KMSAccessDeniedException",
		"KMSDisabledException",
		"KMSNotFoundException",
		"EC2AccessDeniedException",
		"NoPublishedVersionException",
		"DurableExecutionAlreadyStartedException":
		return true
	}
	return false
}

// callError sorts an error from the Invoke call itself.
func (h *Handler) callError(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("invoke %s: timeout: %w", h.arn, err)
	}
	var apiErr smithy.APIError
	code := ""
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var withStatus interface{ HTTPStatusCode() int }
	status := 0
	if errors.As(err, &withStatus) {
		status = withStatus.HTTPStatusCode()
	}
	wrapped := fmt.Errorf("invoke %s: %w", h.arn, err)
	switch {
	case retriableCode(code):
		return wrapped
	case permanentCode(code):
		return handler.Permanent(wrapped)
	case status == 408 || status == 429 || status >= 500:
		return wrapped
	case status >= 400:
		return handler.Permanent(wrapped)
	}
	return wrapped // network failures and the like
}

// result turns a successful invocation's payload into the task result.
func result(payload []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(trimmed) {
		return json.RawMessage(trimmed)
	}
	s, _ := json.Marshal(string(payload)) // a string always marshals
	return s
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	s = s[:maxMessage]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…(truncated)"
}
