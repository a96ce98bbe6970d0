// Package errdefs defines Hutch's error classes and stable error codes, shared by hutchd, the
// in-sandbox agent (hutch-init) and the Go SDK.
//
// Two layers:
//   - Classes are sentinel errors (ErrNotFound, ErrInvalidArgument, …) in the style of
//     containerd's errdefs. Use errors.Is(err, errdefs.ErrNotFound) to branch on a class.
//   - Codes are stable strings on the wire (FILE_NOT_FOUND, SANDBOX_NOT_FOUND, …), taken from the
//     reference system's error table (cloudflare-sandbox-api.md §10) where one exists. Every code
//     belongs to exactly one class and has exactly one HTTP status; the table in codes.go is the
//     only place where that mapping lives.
//
// An *Error carries a code, a human message and an optional context map. It matches its class
// with errors.Is, and matches another *Error with the same code, so
// errors.Is(err, errdefs.New(errdefs.CodeFileNotFound, "")) works end to end after the SDK has
// decoded an envelope. Errors are never classified by their message text.
package errdefs

import (
	"errors"
	"fmt"
	"time"
)

// Error classes. Each code in codes.go belongs to one of them.
var (
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrConflict           = errors.New("conflict")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrDeadlineExceeded   = errors.New("deadline exceeded")
	ErrUnavailable        = errors.New("unavailable")
	ErrNotImplemented     = errors.New("not implemented")
	ErrGone               = errors.New("gone")
	ErrInternal           = errors.New("internal error")
)

// Error is a classified error with a stable code. The zero value is not useful; build one with
// New or Newf, or wrap a cause with Wrap.
type Error struct {
	Code    Code
	Message string
	// Context holds machine-readable details (a path, a sandbox ID, an exit code). It is sent to
	// clients as is, so never put secrets in it.
	Context map[string]any
	// Err is the underlying cause, if any. It is not sent on the wire.
	Err error

	// status is the HTTP status an envelope arrived with; it classes codes this build does not
	// know (a newer server).
	status int
}

// New returns an *Error with the given code and message.
func New(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Newf returns an *Error with the given code and a formatted message. A %w verb in format also
// records the wrapped error as the cause.
func Newf(code Code, format string, args ...any) *Error {
	e := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: e.Error(), Err: errors.Unwrap(e)}
}

// Wrap returns an *Error with the given code whose message is msg: cause. It returns nil if
// cause is nil.
func Wrap(code Code, cause error, msg string) *Error {
	if cause == nil {
		return nil
	}
	m := cause.Error()
	if msg != "" {
		m = msg + ": " + m
	}
	return &Error{Code: code, Message: m, Err: cause}
}

// With returns e after setting key to value in its context. It is meant for chaining at
// construction time.
func (e *Error) With(key string, value any) *Error {
	if e.Context == nil {
		e.Context = map[string]any{}
	}
	e.Context[key] = value
	return e
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's class, or an *Error with the same code.
func (e *Error) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return t.Code == e.Code
	}
	if _, known := codes[e.Code]; !known && e.status != 0 {
		return target == classForStatus(e.status)
	}
	return target == e.Code.Class()
}

// CodeOf returns the stable code of err: the code of the first *Error in its chain, or a
// class-generic code for a bare class sentinel, or CodeInternal.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	for _, c := range classDefaults {
		if errors.Is(err, c.class) {
			return c.code
		}
	}
	return CodeInternal
}

// HTTPStatus returns the HTTP status for err, from its code.
func HTTPStatus(err error) int { return CodeOf(err).HTTPStatus() }

// IsCode reports whether err has the given code anywhere in its chain.
func IsCode(err error, code Code) bool {
	var e *Error
	for err != nil {
		if errors.As(err, &e) {
			if e.Code == code {
				return true
			}
			err = e.Err
			continue
		}
		return false
	}
	return false
}

// Envelope is the JSON error body of every non-2xx reply from hutchd and from the agent. Its
// shape follows the reference system (cloudflare-sandbox-api.md §4.3).
type Envelope struct {
	Code       Code           `json:"code"`
	Message    string         `json:"message"`
	HTTPStatus int            `json:"httpStatus"`
	Context    map[string]any `json:"context,omitempty"`
	Operation  string         `json:"operation,omitempty"`
	Timestamp  time.Time      `json:"timestamp"`
}

// ToEnvelope converts err to its wire form. operation is a dotted name such as "file.read"; it
// may be empty.
func ToEnvelope(err error, operation string) Envelope {
	code := CodeOf(err)
	env := Envelope{
		Code:       code,
		Message:    err.Error(),
		HTTPStatus: code.HTTPStatus(),
		Operation:  operation,
		Timestamp:  time.Now().UTC(),
	}
	var e *Error
	if errors.As(err, &e) {
		env.Context = e.Context
	}
	return env
}

// Err converts an envelope back to an *Error, so errors.Is works on the client side. An unknown
// code keeps its text and is classed by its HTTP status.
func (env Envelope) Err() *Error {
	code := env.Code
	if code == "" {
		code = CodeInternal
	}
	msg := env.Message
	if msg == "" {
		msg = string(code)
	}
	return &Error{Code: code, Message: msg, Context: env.Context, status: env.HTTPStatus}
}
